"""The trust section of the run report, compare's trust column, its --exclude-flagged gates, the
efficiency view and the export's findings, over a store written through the real Store API. The
findings are those the real checks record: a contamination result computed by
engine/contamination.py on generated items, provenance records of the shape the worker writes."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from autorl_tui.engine import contamination
from autorl_tui.reports.analytics import Analytics
from autorl_tui.reports.compare_report import build_compare_report, render_compare_html
from autorl_tui.reports.run_report import build_run_report, render_run_html
from autorl_tui.store.db import Store
from autorl_tui.store.export import export_run
from autorl_tui.tasks.arith.generator import generate
from tests.support import chromium
from tests.support.run_writer import write_matrix

SCHEMAS = Path(__file__).resolve().parents[2] / "autorl_tui" / "reports" / "schemas"


def _provenance(verdict: str, median: float) -> dict:
    return {"ok": True, "verdict": verdict, "summary": f"median relative distance {median}", "median_rel": median,
            "max_rel": median * 2, "min_cos": 1 - median, "far_share": 1.0 if verdict == "not_derived" else 0.0,
            "low_rank_change": False, "n_tensors": 38, "seconds": 0.4,
            "furthest": [{"name": "model.layers.0.mlp.up_proj.weight", "rel": median * 2, "cos": 1 - median}]}


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("trust") / "store.db"
    store = Store(path)
    ids = write_matrix(store, plan="trust", seeds=(0, 1))
    arith = [r for r in ids if "-arith-" in r]
    clean, substituted, contaminated = arith[0], arith[1], arith[2]
    for rid, verdict, median in ((clean, "derived", 0.05), (substituted, "not_derived", 1.41)):
        for sub in store.submissions(rid):
            if sub.status == "scored":
                store.add_finding(rid, "provenance", "info" if verdict == "derived" else "critical",
                                  f"submission {sub.seq}: {verdict}", _provenance(verdict, median),
                                  submission_id=sub.id)
    held_out = generate("test", {"max_n": 1000}, n=30, seed=1234)
    leaked = "\n".join(f"{x['prompt']} {x['solution']}" for x in held_out[:5])
    result = contamination.check(held_out, {"code/sft.jsonl (revision 3)": leaked})
    store.add_finding(contaminated, "contamination", "critical", f"{result['n_matched']} held-out item(s) found",
                      result)
    store.add_finding(contaminated, "honey_token", "critical", "the agent read the decoy .grading/test_labels.jsonl",
                      {"decoy": ".grading/test_labels.jsonl", "what": "a fake held-out labels file", "event": "open"})
    store.close()
    return path, {"clean": clean, "substituted": substituted, "contaminated": contaminated, "all": ids}


def test_the_run_report_shows_the_trust_findings(store_path, tmp_path):
    path, ids = store_path
    with Analytics(path) as a:
        flagged = build_run_report(a, ids["substituted"])
        clean = build_run_report(a, ids["clean"])
        leaked = build_run_report(a, ids["contaminated"])
    for r in (flagged, clean, leaked):
        jsonschema.validate(r, json.loads((SCHEMAS / "run_report.schema.json").read_text()))
    assert flagged["trust"]["flagged"] and flagged["trust"]["worst"] == "critical"
    assert {p["verdict"] for p in flagged["trust"]["provenance"]} == {"not_derived"}
    assert all(p["submission_seq"] is not None for p in flagged["trust"]["provenance"])
    assert not clean["trust"]["flagged"] and clean["trust"]["worst"] == "clean"
    assert leaked["trust"]["by_kind"] == {"contamination": 1, "honey_token": 1}
    html = render_run_html(leaked)
    assert 'id="trust"' in html and "matched item(s) · tolerance 3" in html
    assert html.count("arith-test-") >= 5          # the matching samples are listed
    assert flagged["cost_per_point"]["agent_hours"] > 0


def test_compare_shows_a_trust_column_and_can_exclude_flagged_runs(store_path):
    path, ids = store_path
    schema = json.loads((SCHEMAS / "compare_report.schema.json").read_text())
    with Analytics(path) as a:
        full = build_compare_report(a, plan="trust")
        gated = build_compare_report(a, plan="trust", exclude_flagged=True)
    for r in (full, gated):
        jsonschema.validate(r, schema)
    by_id = {r["run_id"]: r for r in full["runs"]}
    assert by_id[ids["substituted"]]["trust"]["flagged"] and not by_id[ids["clean"]]["trust"]["flagged"]
    assert full["excluded_flagged"] == {"enabled": False, "run_ids": []}
    assert sorted(gated["excluded_flagged"]["run_ids"]) == sorted([ids["substituted"], ids["contaminated"]])
    cell = next(c for c in gated["matrix"] if ids["clean"] in c["run_ids"])
    full_cell = next(c for c in full["matrix"] if ids["clean"] in c["run_ids"])
    assert full_cell["n_runs"] - cell["n_runs"] == 1 and ids["substituted"] not in cell["run_ids"]
    assert len(gated["runs"]) == len(full["runs"])          # still listed, marked as excluded
    dots = {d["run_id"]: d for d in full["efficiency"]["dots"]}
    assert dots[ids["substituted"]]["flagged"] and full["efficiency"]["axis"] in ("agent_hours", "gpu_hours")
    html = render_compare_html(gated)
    assert "2 flagged run(s) excluded" in html and 'id="trust"' in html and "<circle" in html


def test_the_export_carries_the_findings(store_path):
    path, ids = store_path
    import sqlite3

    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        out = export_run(lambda sql, params=(): [dict(r) for r in conn.execute(sql, params)], ids["contaminated"])
    finally:
        conn.close()
    kinds = {f["kind"]: f for f in out["findings"]}
    assert set(kinds) == {"contamination", "honey_token"}
    assert kinds["contamination"]["evidence"]["n_matched"] == 5


@pytest.mark.chromium
def test_the_trust_section_and_column_render_in_chromium(store_path, tmp_path):
    if chromium.CHROMIUM is None:
        pytest.skip("chromium is not installed (scripts/system-deps.sh)")
    path, ids = store_path
    with Analytics(path) as a:
        run_html = render_run_html(build_run_report(a, ids["contaminated"]))
        cmp_html = render_compare_html(build_compare_report(a, plan="trust"))
    for name, html, anchor in (("trust-run-report", run_html, "Trust"), ("trust-compare", cmp_html,
                                                                           "Trust and efficiency")):
        page = tmp_path / f"{name}.html"
        page.write_text(html)
        rendered = chromium.render(page, tmp_path / f"{name}.png", height=4400)
        assert not rendered.console_errors
        assert anchor in rendered.dom and rendered.screenshot.stat().st_size > 10_000

"""`autorl-tui report` end to end over a store written through the real Store API: the JSON
validates against its schema, every number in it is recomputed here from the store's rows with
plain sqlite3, and the HTML renders in headless Chromium without console errors."""

import difflib
import json
import math
import re
import sqlite3
import statistics
import zlib
from pathlib import Path

import jsonschema
import pytest

from autorl_tui.cli import main
from autorl_tui.store.db import Store
from tests.support import chromium
from tests.support.run_writer import RunShape, write_run

SCHEMAS = Path(__file__).resolve().parents[2] / "autorl_tui" / "reports" / "schemas"


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    store = Store(home / "store.db")
    write_run(store, RunShape("r0001-arith-baseline-copy-s0", driver="claude-sonnet", gpus=[0],
                              dangers=("kl_spike", "nan"), metric_steps=90, n_stdout=400))
    write_run(store, RunShape("r0002-arith-baseline-copy-s1", seed=1, scores=[], drops=["rejected"],
                              state="failed", end_reason="agent exited with code 2", start=1_790_050_000.0))
    store.close()
    out = tmp_path_factory.mktemp("out")
    code = main(["--home", str(home), "report", "r0001-arith-baseline-copy-s0",
                 "--html", str(out / "run.html"), "--json", str(out / "run.json")])
    assert code == 0
    return home / "store.db", out, json.loads((out / "run.json").read_text())


def rows(db, q, params=()):
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(q, params)]
    finally:
        conn.close()


def blob(db, sha):
    r = rows(db, "SELECT encoding, content FROM blobs WHERE sha256 = ?", (sha,))[0]
    return zlib.decompress(r["content"]) if r["encoding"] == "zlib" else r["content"]


def test_json_validates_against_its_schema(reported):
    _, _, report = reported
    schema = json.loads((SCHEMAS / "run_report.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(report, schema)
    broken = dict(report, outcome=dict(report["outcome"], baseline_score="20"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_every_number_is_traceable_to_store_rows(reported):
    db, _, r = reported
    run_id = r["run"]["run_id"]
    run = rows(db, "SELECT * FROM runs WHERE id = ?", (run_id,))[0]
    t0 = run["started_at"]
    checked: set[str] = set()

    # run header and protocol
    for k, v in r["run"].items():
        assert v == run["id" if k == "run_id" else k], k
    spec = json.loads(run["spec"])
    for k in ("temperature", "top_p", "n", "max_tokens"):
        assert r["protocol"][k] == spec["protocol"][k]
    assert r["protocol"]["splits"] == list(spec["task"]["data"]["splits"])
    checked |= {"run", "protocol"}
    att = rows(db, "SELECT * FROM attempts WHERE run_id = ? ORDER BY number", (run_id,))
    assert [(x["number"], x["state"], x["exit_code"]) for x in r["attempts"]] == \
        [(x["number"], x["state"], x["exit_code"]) for x in att]
    assert r["attempts"][0]["duration_s"] == pytest.approx(att[0]["ended_at"] - att[0]["started_at"])
    checked.add("attempts")

    # outcome
    subs = rows(db, "SELECT * FROM submissions WHERE run_id = ? ORDER BY seq", (run_id,))
    best = next(s for s in subs if s["id"] == run["best_submission_id"])
    o = r["outcome"]
    for k in ("baseline_score", "best_dev_score", "test_score", "improvement", "best_submission_id"):
        assert o[k] == run[k], k
    base_dev = run.get("baseline_dev_score", run["baseline_score"])  # older schema: one (dev) baseline
    assert o["baseline_dev_score"] == base_dev
    assert o["dev_improvement"] == pytest.approx(run["best_dev_score"] - base_dev)
    assert o["best_submission_seq"] == best["seq"]
    checked.add("outcome")

    # timeline
    t = r["timeline"]
    assert t["n_submissions"] == len(subs)
    assert t["n_scored"] == sum(s["status"] == "scored" for s in subs)
    assert t["n_dropped"] == sum(s["status"] in ("rejected", "error", "duplicate") for s in subs)
    assert t["time_to_first_valid_s"] == pytest.approx(min(s["received_at"] for s in subs if s["status"] == "scored") - t0)
    assert t["time_to_best_s"] == pytest.approx(best["received_at"] - t0)
    assert t["wall_s"] == pytest.approx(run["ended_at"] - t0)
    assert t["budget_used"] == pytest.approx((run["ended_at"] - t0) / run["budget_s"])
    running = None
    for got, s in zip(t["submissions"], subs, strict=True):
        assert (got["submission_id"], got["seq"], got["status"], got["score"], got["test_score"], got["error"],
                got["revision_id"], got["path"]) == (s["id"], s["seq"], s["status"], s["score"], s["test_score"],
                                                     s["error"], s["revision_id"], s["path"])
        assert got["t_s"] == pytest.approx(s["received_at"] - t0)
        assert got["latency_s"] == pytest.approx(s["graded_at"] - s["received_at"])
        assert got["metrics"] == (json.loads(s["metrics"]) if s["metrics"] else None)
        if s["score"] is not None:
            running = s["score"] if running is None else max(running, s["score"])
        assert got["best_so_far"] == running
    checked.add("timeline")

    # phases tile the agent's time
    assert sum(r["phases"]["totals_s"].values()) == pytest.approx(run["ended_at"] - t0)
    assert r["phases"]["segments"][-1]["end_s"] == pytest.approx(run["ended_at"] - t0)
    checked.add("phases")

    # metrics: sizes, stats and the evidence of the checks
    for s in r["metrics"]["series"]:
        raw = rows(db, "SELECT value FROM metrics WHERE run_id = ? AND name = ? AND source = ? ORDER BY ts, id",
                   (run_id, s["name"], s["source"]))
        assert s["n_points"] == len(raw) == sum(p["n"] for p in s["points"])
        assert s["n_nan"] == sum(x["value"] is None for x in raw)
        finite = [x["value"] for x in raw if x["value"] is not None and math.isfinite(x["value"])]
        means = [p["mean"] for p in s["points"] if p["mean"] is not None]
        assert min(p["min"] for p in s["points"] if p["min"] is not None) == pytest.approx(min(finite))
        assert max(p["max"] for p in s["points"] if p["max"] is not None) == pytest.approx(max(finite))
        assert len(s["points"]) <= r["metrics"]["max_points_per_series"] and means
    for st in r["metrics"]["stats"]:
        finite = [x["value"] for x in rows(db, "SELECT value FROM metrics WHERE run_id = ? AND name = ? ORDER BY ts, id",
                                           (run_id, st["name"])) if x["value"] is not None and math.isfinite(x["value"])]
        assert st["median"] == pytest.approx(statistics.median(finite))
        assert st["max"] == pytest.approx(max(finite))
        tenth = max(1, st["n_points"] // 10)
        if st["n_nan"] == 0:
            assert st["head_mean"] == pytest.approx(statistics.fmean(finite[:tenth]))
            assert st["tail_mean"] == pytest.approx(statistics.fmean(finite[-tenth:]))
    checks = {c["signal"]: c for c in r["metrics"]["checks"]}
    scored = [s for s in subs if s["status"] == "scored"]
    windows = checks["reward_up_dev_down"]["windows"]
    assert [(w["seq"], w["score"]) for w in windows] == [(s["seq"], s["score"]) for s in scored]
    for w, s, prev in zip(windows, scored, [None] + scored[:-1]):
        vals = [x["value"] for x in rows(db, "SELECT ts, value FROM metrics WHERE run_id = ? AND name = 'reward'", (run_id,))
                if x["ts"] <= s["received_at"] and (prev is None or x["ts"] > prev["received_at"])]
        assert w["n_points"] == len(vals) and w["reward_mean"] == pytest.approx(statistics.fmean(vals))
    kl = next(st for st in r["metrics"]["stats"] if st["name"] == "kl")
    assert checks["kl_spike"]["status"] == "flagged" and checks["kl_spike"]["evidence"][0]["max"] == kl["max"]
    assert checks["non_finite"]["evidence"] == [{"series": "loss", "n_nan": 1, "n_inf": 0,
                                                 "first_step": checks["non_finite"]["evidence"][0]["first_step"]}]
    checked.add("metrics")

    # revisions: diffs between consecutive submissions' snapshots
    revs = {x["id"]: x for x in rows(db, "SELECT * FROM revisions WHERE run_id = ?", (run_id,))}
    first = min(revs.values(), key=lambda x: x["seq"])
    prev = json.loads(first["manifest"])
    assert r["revisions"]["n_revisions"] == len(revs)
    for got, s in zip(r["revisions"]["by_submission"], subs, strict=True):
        rev = revs[s["revision_id"]]
        man = json.loads(rev["manifest"])
        assert got["revision_seq"] == rev["seq"] and got["n_files"] == rev["n_files"]
        added = removed = 0
        for path in set(prev) | set(man):
            if prev.get(path) == man.get(path):
                continue
            a = blob(db, prev[path]).decode().splitlines(True) if path in prev else []
            b = blob(db, man[path]).decode().splitlines(True) if path in man else []
            lines = list(difflib.unified_diff(a, b, n=2))
            added += sum(ln.startswith("+") and not ln.startswith("+++") for ln in lines)
            removed += sum(ln.startswith("-") and not ln.startswith("---") for ln in lines)
        assert (got["lines_added"], got["lines_removed"]) == (added, removed)
        prev = man
    checked.add("revisions")

    # events
    events = rows(db, "SELECT kind, data FROM events WHERE run_id = ?", (run_id,))
    assert r["events"]["total"] == len(events)
    for sec in r["events"]["sections"]:
        if sec["category"].startswith("action:"):
            kind = sec["category"].split(":", 1)[1]
            n = sum(e["kind"] == "action" and json.loads(e["data"] or "{}").get("kind") == kind for e in events)
        else:
            n = sum(e["kind"] == sec["category"] for e in events)
        assert sec["n"] == n and sec["shown"] + sec["omitted"] == n
    assert r["events"]["shown"] < r["events"]["total"]  # the stdout flood was capped
    checked.add("events")

    # samples of the selected submission
    samples = rows(db, "SELECT correct, failure_kind FROM samples WHERE submission_id = ?", (best["id"],))
    sm = r["samples"]
    assert sm["n"] == len(samples) and sm["submission_id"] == best["id"]
    counts = {c["kind"]: c["n"] for c in sm["counts"]}
    assert counts.get("correct", 0) == sum(x["correct"] == 1 for x in samples)
    for g in sm["badcases"]:
        assert g["n"] == sum(x["failure_kind"] == g["kind"] and x["correct"] != 1 for x in samples)
        assert len(g["examples"]) == min(g["n"], r["limits"]["badcases_per_kind"])
    base = rows(db, "SELECT id FROM baselines WHERE task = ? AND model = ?", (run["task"], run["model"]))[0]["id"]
    assert sm["baseline_id"] == base
    checked.add("samples")

    # drops: every unscored submission with its reason
    unscored = [s for s in subs if s["status"] != "scored"]
    assert [d["submission_id"] for d in r["drops"]] == [s["id"] for s in unscored]
    for d, s in zip(r["drops"], unscored):
        assert d["reason"] == s["error"] or (s["status"] == "duplicate" and d["reason"].startswith("same content"))
        assert d["t_s"] == pytest.approx(s["received_at"] - t0)
    checked.add("drops")

    # cost
    res = rows(db, "SELECT ts, cpu_percent, gpus FROM resources WHERE run_id = ? ORDER BY ts, id", (run_id,))
    cpu = sum(a["cpu_percent"] / 100 * min(b["ts"] - a["ts"], 60) for a, b in zip(res, res[1:])) / 3600
    gpu_busy = sum(sum(g["util"] for g in json.loads(a["gpus"])) / 100 * min(b["ts"] - a["ts"], 60)
                   for a, b in zip(res, res[1:])) / 3600
    att = rows(db, "SELECT started_at, ended_at, gpus FROM attempts WHERE run_id = ?", (run_id,))
    alloc = sum((x["ended_at"] - x["started_at"]) * len(json.loads(x["gpus"])) for x in att) / 3600
    c = r["cost"]
    assert c["cpu_hours"] == pytest.approx(cpu) and c["gpu_busy_hours"] == pytest.approx(gpu_busy)
    assert c["gpu_allocated_hours"] == pytest.approx(alloc)
    assert c["peak_rss_bytes"] == max(x["rss_bytes"] for x in rows(db, "SELECT rss_bytes FROM resources WHERE run_id = ?", (run_id,)))
    assert (c["tokens_in"], c["tokens_out"], c["cost_usd"]) == (run["tokens_in"], run["tokens_out"], run["cost_usd"])
    sums = rows(db, "SELECT sum(inference_s) i, sum(grading_s) g FROM submissions WHERE run_id = ?", (run_id,))[0]
    assert (c["inference_s"], c["grading_s"]) == (sums["i"], sums["g"])
    checked.add("cost")

    # nothing numeric escaped the checks above (limits are the report's own constants)
    numeric_sections = {k for k, v in r.items() if _has_number(v)}
    assert numeric_sections - checked <= {"schema_version", "generated_at", "limits"}


def _has_number(v) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):
        return True
    if isinstance(v, dict):
        return any(_has_number(x) for x in v.values())
    if isinstance(v, list):
        return any(_has_number(x) for x in v)
    return False


def test_html_is_self_contained(reported):
    _, out, r = reported
    html = (out / "run.html").read_text()
    # the only URL is the SVG namespace; no scripts, styles, fonts or images from anywhere
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", html))
    assert urls <= {"http://www.w3.org/2000/svg"}
    assert not re.search(r"<(link|img|iframe)\b", html) and "src=" not in html
    for section in ("header", "outcome", "timeline", "phases", "training", "code", "log", "badcases", "drops", "cost"):
        assert f'<section id="{section}">' in html
    assert "claude-sonnet" in html and "KL spike" in html
    assert "&lt;b&gt;show&lt;/b&gt;" in html  # sample prompts are escaped, not injected


def test_failed_run_without_scores_still_reports(reported, tmp_path):
    db, _, _ = reported
    home = db.parent
    code = main(["--home", str(home), "report", "r0002-arith-baseline-copy-s1", "--json", str(tmp_path / "f.json"),
                 "--html", str(tmp_path / "f.html")])
    assert code == 0
    r = json.loads((tmp_path / "f.json").read_text())
    jsonschema.validate(r, json.loads((SCHEMAS / "run_report.schema.json").read_text()))
    assert r["outcome"]["state"] == "failed" and r["outcome"]["best_dev_score"] is None
    assert r["samples"]["submission_id"] is None and [d["drop_kind"] for d in r["drops"]] == ["rejected"]


def test_unknown_run_exits_2_with_a_hint(reported, capsys):
    db, _, _ = reported
    assert main(["--home", str(db.parent), "report", "r9999", "--json", "/dev/null"]) == 2
    err = capsys.readouterr().err
    assert "no run 'r9999'" in err and "r0001-arith-baseline-copy-s0" in err


@pytest.mark.chromium
@pytest.mark.skipif(chromium.CHROMIUM is None, reason="LOUD SKIP: headless Chromium is not installed "
                    "(apt-get install chromium, or `make system-deps`); the report's rendering is NOT verified")
def test_html_renders_in_headless_chromium(reported):
    _, out, r = reported
    shot = out / "run-report.png"
    rendered = chromium.render(out / "run.html", shot, height=3200)
    assert rendered.console_errors == []
    assert shot.stat().st_size > 50_000  # a real page, not a blank one
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    for text in ("Run r0001-arith-baseline-copy-s0", "Training monitor", "Drops manifest", "<svg"):
        assert text in rendered.dom

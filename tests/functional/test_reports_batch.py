"""Reports over a store produced by the real engine: `autorl-tui --batch` runs a plan with the
built-in `baseline-copy` agent (the control: it submits the base model unchanged) and the scripted
`test-train-twice` agent (trains, logs metrics, edits code/, submits twice), on the real grader
with the tiny model. Then `report` and `compare` read that store, every number is traced back to
its rows, and the report renders in headless Chromium."""

import json

import jsonschema
import pytest

from autorl_tui.cli import main
from tests.support import chromium
from tests.support.harness import REPO
from tests.support.report_trace import check_run_report, rows

SCHEMAS = REPO / "autorl_tui" / "reports" / "schemas"

pytestmark = pytest.mark.slow


@pytest.fixture
def batch_home(train_twice_home):
    return train_twice_home    # built once per session (tests/conftest.py), shared with test_engine_end_to_end


def test_run_reports_over_real_runs_are_traceable(batch_home, tmp_path):
    db = batch_home / "store.db"
    runs = {r["agent"]: r for r in rows(db, "SELECT * FROM runs")}
    assert set(runs) == {"baseline-copy", "test-train-twice"}
    schema = json.loads((SCHEMAS / "run_report.schema.json").read_text())
    reports = {}
    for agent, run in runs.items():
        out = tmp_path / agent
        assert main(["--home", str(batch_home), "report", run["id"], "--html", str(out / "r.html"),
                     "--json", str(out / "r.json")]) == 0
        report = json.loads((out / "r.json").read_text())
        jsonschema.validate(report, schema)
        check_run_report(db, report)
        assert report["outcome"]["state"] == "done"
        reports[agent] = (report, out / "r.html")
    # the control submits the base model: zero improvement, and the report says so
    control, _ = reports["baseline-copy"]
    assert control["timeline"]["n_scored"] >= 1
    assert control["outcome"]["improvement"] == pytest.approx(0.0, abs=1e-9)
    assert control["outcome"]["test_score"] == control["outcome"]["baseline_score"]
    # the training agent: two scored submissions, metrics charted, code diffs, a training phase
    trained, html = reports["test-train-twice"]
    assert [s["status"] for s in trained["timeline"]["submissions"]] == ["scored", "scored"]
    assert any(s["name"] == "loss" and s["n_points"] == 40 for s in trained["metrics"]["series"])
    assert trained["phases"]["totals_s"]["train"] > 0
    diffs = trained["revisions"]["by_submission"]
    assert diffs[1]["revision_seq"] != diffs[0]["revision_seq"]
    if chromium.CHROMIUM is None:
        pytest.skip("LOUD SKIP: headless Chromium is not installed; the real run's report rendering is NOT verified")
    rendered = chromium.render(html, tmp_path / "real-run-report.png", height=3200)
    assert rendered.console_errors == [] and "Training monitor" in rendered.dom


def test_compare_over_real_runs(batch_home, tmp_path):
    out = tmp_path / "cmp.json"
    assert main(["--home", str(batch_home), "compare", "--plan", "reports-e2e", "--json", str(out),
                 "--html", str(tmp_path / "cmp.html")]) == 0
    cmp = json.loads(out.read_text())
    jsonschema.validate(cmp, json.loads((SCHEMAS / "compare_report.schema.json").read_text()))
    runs = {r["agent"]: r for r in rows(batch_home / "store.db", "SELECT * FROM runs")}
    for cell in cmp["matrix"]:
        assert cell["n_runs"] == 1 and cell["mean"] == pytest.approx(runs[cell["agent"]]["improvement"])
    # one seed each: no seed noise; each cell is judged by its run's held-out bootstrap band
    for g in cmp["gates"]:
        for c in g["cells"]:
            band = c["band"]
            assert c["noise"] is None and band is not None and band["observed"] == pytest.approx(c["mean"])
            expected = "up" if band["low"] > 0 else "regressed" if band["high"] < 0 else "flat"
            assert c["verdict"] == expected and "bootstrap band" in c["reason"], c
    # the control submits the base model unchanged: the same answer on every held-out question
    control = next(c for g in cmp["gates"] if g["agent"] == "baseline-copy" for c in g["cells"])
    assert (control["band"]["low"], control["band"]["high"], control["verdict"]) == (0.0, 0.0, "flat")

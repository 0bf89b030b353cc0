"""Importing AutoRL-Bench run folders and results.csv (fixtures written to its format in
tests/data/autorl_bench), and its ten diagnostics computed as its code computes them."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autorl_tui.interop import autorl_bench_metrics
from autorl_tui.interop.autorl_bench_import import import_paths
from autorl_tui.store.db import Store, decode_row

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "data" / "autorl_bench"
GOOD = "ab-arith-small-20260228t100000-example-agent"
ROW_ONLY = "ab-gsm8k-20260302t120000-codex"
BROKEN = "ab-gsm8k-20260301t090000-claude"


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "store.db")
    yield s
    s.close()


def test_import_reads_runs_reports_malformed_lines_and_is_idempotent(store):
    report = import_paths(store, [FIXTURES / "workspace", FIXTURES / "results.csv"])
    assert sorted(report.imported) == [GOOD, ROW_ONLY]
    problems = "\n".join(report.problems)
    # the malformed scores.json is named with its line, and its whole run (and results row) skipped
    assert "20260301T090000_claude/scores.json: line 14" in problems and "skipped" in problems
    assert "results.csv: line 5" in problems
    assert store.one("SELECT COUNT(*) AS n FROM runs WHERE id=?", (BROKEN,))["n"] == 0
    assert store.one("SELECT COUNT(*) AS n FROM events WHERE run_id=?", (BROKEN,))["n"] == 0

    run = decode_row("runs", store.one("SELECT * FROM runs WHERE id=?", (GOOD,)))
    assert run["state"] == "done" and run["imported_from"].startswith("autorl-bench:")
    assert run["task"] == "arith-small" and run["agent"] == "example_agent" and run["model"] == "tiny"
    assert run["test_score"] is None and run["baseline_score"] is None and "no held-out test" in run["end_reason"]
    assert run["baseline_dev_score"] == 40.0 and run["best_dev_score"] == 45.0 and run["dev_improvement"] == 5.0
    assert run["budget_s"] == 3600 and run["ended_at"] - run["started_at"] == 1200
    subs = store.query("SELECT * FROM submissions WHERE run_id=? ORDER BY seq", (GOOD,))
    assert [(s["seq"], s["status"], s["score"]) for s in subs] == [(1, "error", None), (2, "scored", 45.0),
                                                                   (3, "scored", 40.0)]
    assert "could not load model weights" in subs[0]["error"]
    assert run["best_submission_id"] == subs[1]["id"]
    logs = [e["message"] for e in store.query("SELECT message FROM events WHERE run_id=? AND kind='stdout' "
                                              "ORDER BY id", (GOOD,))]
    assert logs[0] == "=== Example Agent ===" and len(logs) == 5
    rev = store.one("SELECT * FROM revisions WHERE run_id=?", (GOOD,))
    assert json.loads(rev["manifest"]).keys() == {"train.py"}

    row_only = decode_row("runs", store.one("SELECT * FROM runs WHERE id=?", (ROW_ONLY,)))
    assert row_only["best_dev_score"] == 36.5 and row_only["driver"] == "gpt-5.2" and row_only["state"] == "done"

    again = import_paths(store, [FIXTURES / "workspace", FIXTURES / "results.csv"])
    assert again.imported == [] and sorted(again.already) == [GOOD, ROW_ONLY]
    assert store.one("SELECT COUNT(*) AS n FROM submissions")["n"] == 3


def test_diagnostics_follow_its_definitions(store):
    import_paths(store, [FIXTURES / "workspace", FIXTURES / "results.csv"])
    run = decode_row("runs", store.one("SELECT * FROM runs WHERE id=?", (GOOD,)))
    subs = store.query("SELECT * FROM submissions WHERE run_id=?", (GOOD,))
    m = autorl_bench_metrics.for_run(run, subs)
    assert set(m) == set(autorl_bench_metrics.FIELDS)
    assert m["score_trajectory"] == [0.0, 45.0, 40.0]          # a failed evaluation counts as 0.0
    assert m["valid_submission_rate"] == pytest.approx(2 / 3) and m["first_valid_idx"] == 2
    assert m["first_valid_delay"] == 600 and m["time_to_first_improvement"] == 600 and m["time_to_best"] == 600
    assert m["monotonic_ratio"] == 0.5                          # up once (0 → 45) out of two steps
    assert m["copy_model_count"] == 1                           # submission 3 named the base model's folder
    assert m["time_used_ratio"] == pytest.approx(1200 / 3600) and m["last_submit_gap"] == 300


@pytest.mark.subprocess
def test_import_command_exit_status_and_messages(tmp_path):
    home = tmp_path / "home"
    bad = tmp_path / "bad"
    shutil.copytree(FIXTURES / "workspace" / "gsm8k", bad)
    proc = subprocess.run([sys.executable, "-m", "autorl_tui", "--home", str(home), "import", "autorl-bench", str(bad),
                           str(tmp_path / "nowhere")], capture_output=True, text=True, env={"PYTHONPATH": str(REPO)},
                          cwd=REPO, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "scores.json: line 14" in proc.stderr and "nowhere: does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr and "0 imported" in proc.stdout


def _export_and_recompute(store, out):
    """Export every run; AutoRL-Bench's metrics code (tests/support/autorl_bench_reference.py,
    its compute_metrics rewritten from its source) on each exported folder, called as its runner
    calls it: results.csv's baseline, base model at <workspace>/models/<base_model>."""
    import csv

    from autorl_tui.interop.autorl_bench_export import export
    from autorl_tui.store.queries import StoreReader
    from tests.support.autorl_bench_reference import compute_metrics

    export(StoreReader.over(store), out)
    result = {}
    for row in csv.DictReader((out / "results.csv").open()):
        folder = Path(row["workspace"])
        baseline = None if row["baseline"] in ("", "None") else float(row["baseline"])
        theirs = compute_metrics(folder, baseline, str(folder / "models" / row["base_model"]))
        ours = json.loads((folder / "reports" / "metrics.json").read_text())
        result[row["run_id"]] = (ours, theirs, json.loads((folder / "run_meta.json").read_text()),
                                 json.loads((folder / "scores.json").read_text()))
    return result


def test_import_export_then_its_own_metrics_code_gives_the_exported_metrics(store, tmp_path):
    import_paths(store, [FIXTURES / "workspace", FIXTURES / "results.csv"])
    runs = _export_and_recompute(store, tmp_path / "out")
    ours, theirs, meta, scores = runs[GOOD]
    assert ours == theirs                                   # all ten, exactly (ints stay ints, floats equal)
    assert ours["copy_model_count"] == 1 and ours["time_used_ratio"] == 1200 / 3600
    # run_meta.json: its four integer fields; scores.json numbered 1..N over graded entries
    assert meta == json.loads((FIXTURES / "workspace" / "arith-small" / "20260228T100000_example_agent" /
                               "run_meta.json").read_text())
    assert all(isinstance(v, int) for v in meta.values())
    assert [e["submission_id"] for e in scores] == [1, 2, 3]
    assert [type(v) for v in ours.values()] == [type(v) for v in theirs.values()]


def test_runs_with_fractional_clocks_export_what_its_code_recomputes(store, tmp_path):
    """Our own runs keep float clocks; the export and our diagnostics both use the whole seconds
    run_meta.json holds, so its code on the export does not land a second off."""
    import_paths(store, [FIXTURES / "workspace"])
    import sqlite3

    store.flush()
    db = sqlite3.connect(tmp_path / "store.db")
    with db:         # a run of ours: float clocks, no imported clock
        db.execute("UPDATE runs SET started_at = started_at + 0.7, ended_at = ended_at + 0.2, spec = ? WHERE id = ?",
                   (json.dumps({"model_name": "tiny"}), GOOD))
        db.execute("UPDATE submissions SET graded_at = graded_at + 0.4, received_at = received_at + 0.4")
    db.close()
    ours, theirs, meta, _ = _export_and_recompute(store, tmp_path / "out")[GOOD]
    assert ours == theirs and all(isinstance(v, int) for v in meta.values())
    assert ours["first_valid_delay"] == 600 and ours["time_used_ratio"] == (meta["end_time"] - meta["start_time"]) / 3600


def test_a_run_without_end_time_gives_its_nulls(store, tmp_path):
    src = FIXTURES / "workspace" / "arith-small" / "20260228T100000_example_agent"
    ctrl_c = tmp_path / "ws" / "arith-small" / src.name
    shutil.copytree(src, ctrl_c)
    meta = json.loads((ctrl_c / "run_meta.json").read_text())
    del meta["end_time"]                                   # what a Ctrl-C'd AutoRL-Bench run leaves
    (ctrl_c / "run_meta.json").write_text(json.dumps(meta))
    assert import_paths(store, [tmp_path / "ws"]).imported == [GOOD]
    run = decode_row("runs", store.one("SELECT * FROM runs WHERE id=?", (GOOD,)))
    m = autorl_bench_metrics.for_run(run, store.query("SELECT * FROM submissions WHERE run_id=?", (GOOD,)))
    assert m["time_used_ratio"] is None and m["last_submit_gap"] is None
    assert m["first_valid_delay"] == 600 and m["time_to_best"] == 600          # the rest as before
    ours, theirs, exported_meta, _ = _export_and_recompute(store, tmp_path / "out")[GOOD]
    assert exported_meta["end_time"] is None and ours == theirs == m


def test_the_workspace_run_meta_has_its_integer_fields(tmp_path):
    from autorl_tui.catalog.tasks import load_task_card
    from autorl_tui.engine.workspace import Workspace, write_run_meta

    card = load_task_card(REPO / "tests" / "data" / "tasks" / "arith-small" / "task.yaml")
    ws = Workspace(tmp_path / "ws", "tiny")
    (ws.root / "data").mkdir(parents=True)
    write_run_meta(ws, card=card, budget_s=120.0, start=1772272800.83, deadline=1772272920.83,
                   last_submit_time=1772272850.6)
    meta = json.loads((ws.root / "run_meta.json").read_text())
    assert {k: meta[k] for k in ("start_time", "timeout_s", "last_submit_time", "end_time")} == {
        "start_time": 1772272800, "timeout_s": 120, "last_submit_time": 1772272850, "end_time": None}

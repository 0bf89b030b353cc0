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

"""Gradings in parallel up to the machine (issue 36), through the real CLI: two runs of a real
engine (`--concurrency 2`, two grading slots) whose agents submit a burst of 3 at the same moment
to the real grading API; the real sandboxed warm grader grades the real tiny model."""

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.harness import REPO, TASKS, TEST_AGENTS, home_with_tiny, write_plan

pytestmark = pytest.mark.slow


@pytest.fixture
def home(tiny_model_dir):
    yield from home_with_tiny(tiny_model_dir)


def _db(home: Path) -> sqlite3.Connection | None:
    if not (home / "store.db").exists():
        return None
    conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True, timeout=30)
    conn.row_factory = sqlite3.Row
    return conn


def _wait_both_running(home: Path, proc: subprocess.Popen, timeout_s: float = 600) -> list[dict]:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and proc.poll() is None:
        db = _db(home)
        if db is not None:
            try:
                rows = [dict(r) for r in db.execute("SELECT id, state, workspace FROM runs ORDER BY id")]
            except sqlite3.OperationalError:      # the schema is being created
                rows = []
            finally:
                db.close()
            if len(rows) == 2 and all(r["state"] == "running" and r["workspace"] for r in rows):
                return rows
        time.sleep(0.1)
    raise AssertionError(f"the two runs were not both running (engine exit {proc.poll()})")


def test_two_runs_submitting_at_once_are_graded_concurrently_in_order_by_one_server(home, tmp_path):
    plan = write_plan(tmp_path / "plan.yaml", agents=["test-burst"], seeds=[0, 1], budget="300s")
    env = {**os.environ, "PYTHONPATH": str(REPO), "AUTORL_GRADING_SLOTS": "2", "BURST_N": "3"}
    cmd = [sys.executable, "-m", "autorl_tui", "--home", str(home), "--agents-dir", str(TEST_AGENTS),
           "--tasks-dir", str(TASKS), "--plain", "--concurrency", "2", "--batch", str(plan)]
    with open(tmp_path / "batch.log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        try:
            runs = _wait_both_running(home, proc)
            for run in runs:           # both agents submit their burst at the same moment
                Path(run["workspace"], "go").write_text("go\n")
            assert proc.wait(timeout=900) == 0, (tmp_path / "batch.log").read_text()[-3000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    db = _db(home)
    intervals: dict[str, list[tuple[str, float, float]]] = {}
    pids, waits = set(), {}
    for run in runs:
        rid = run["id"]
        subs = [dict(r) for r in db.execute("SELECT seq, status FROM submissions WHERE run_id=? ORDER BY seq", (rid,))]
        assert [s["status"] for s in subs] == ["scored"] * 3, subs
        starts, ends = {}, {}
        for e in db.execute("SELECT ts, message, data FROM events WHERE run_id=? AND kind='grading' ORDER BY id",
                            (rid,)):
            data = json.loads(e["data"] or "{}")
            if data.get("split") != "dev" or not e["message"].startswith("grad"):
                continue
            name = e["message"].split()[1]           # the snapshot's folder: its seq, "001" (the baseline: "tiny")
            if not name.isdigit():
                continue
            if data.get("phase") == "start":
                starts[name] = e["ts"]
            elif data.get("phase") == "end":
                ends[name] = e["ts"]
                pids.add(data["server"]["pid"])
                # the grading's spans, recorded with it (issue 36): from the lease to the lease's release
                assert {"model_load", "inference"} <= set(data["phases"])
                assert 0 < data["phases"]["total"] <= ends[name] - starts[name] + 0.01
                waits.setdefault(rid, []).append(data["server"]["waited_s"])
        assert sorted(starts) == sorted(ends) == ["001", "002", "003"], (starts, ends)
        intervals[rid] = [(n, starts[n], ends[n]) for n in sorted(starts)]
        # Each run's own submissions are graded in their order, one after the other.
        for (_, _, end_a), (_, start_b, _) in zip(intervals[rid], intervals[rid][1:]):
            assert end_a <= start_b
        # The burst's later submissions waited for a slot, and their answers say where they stood.
        answers = [json.loads(m.split(": ", 1)[1]) for (m,) in db.execute(
            "SELECT message FROM events WHERE run_id=? AND kind='stdout' AND message LIKE 'answer %'", (rid,))]
        assert len(answers) == 3 and all(a["http"] == 200 for a in answers), answers
        assert all("grading_queue" in a for a in answers)
        assert max(a["grading_queue"]["position"] for a in answers) >= 1
    a, b = (intervals[r["id"]] for r in runs)
    overlapping = [(x[0], y[0]) for x in a for y in b if x[1] < y[2] and y[1] < x[2]]
    assert overlapping, f"no grading of one run overlapped one of the other: {a} {b}"
    # One warm server for the engine: every grading of both runs ran in it (torch imported once), and
    # the run that reached its gradings second took it live, without waiting for a server start.
    assert len(pids) == 1, pids
    later = max(runs, key=lambda r: min(s for _, s, _ in intervals[r["id"]]))
    assert max(waits[later["id"]]) < 2.0, waits

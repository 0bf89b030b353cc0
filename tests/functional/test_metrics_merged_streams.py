"""Printed training points under merged streams, under the real engine (`--batch`): agents that run
their trainer as AutoRL-Bench's agents do, `TRAINER 2>&1 | tee logs/train.log` (tqdm's `\\r`
redraws and the log dicts then share lines), with the stock `trl sft` command line and with a TRL
GRPO script in example_agent's manner (no saving, no reporting: stdout is its only source). Every
point of the trainer's own log_history is stored exactly once, live, in one session per training,
and the summary dict opens no session of its own."""

import ast
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.support.harness import make_reachable_home, write_plan
from tests.support.store_watcher import watched_batch

pytestmark = pytest.mark.slow
STEPS = 10
NOT_STORED = {"epoch", "step", "total_flos"}
SUMMARY = {"train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss"}


@pytest.fixture(scope="module")
def batch(tiny_model_dir, tmp_path_factory):
    if shutil.which("trl", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("LOUD SKIP: the `trl` command line is not installed next to this Python")
    home = make_reachable_home("autorl-merged-")
    plan = write_plan(tmp_path_factory.mktemp("plan") / "plan.yaml", name="metrics-merged",
                      agents=["test-trl-sft-merged", "test-trl-grpo-merged"], budget="400s")
    watcher, db, runs = watched_batch(home, plan, tiny_model_dir, env={"TRAIN_STEPS": str(STEPS)})
    yield db, runs, watcher.point_seen
    db.close()
    if not os.environ.get("KEEP_HOME"):
        shutil.rmtree(home.parent, ignore_errors=True)


def _printed(run):
    """(time, dict) of each log dict as it came through the pipe: the text after the line's last `\\r`."""
    lines = [json.loads(l) for l in (Path(run["workspace"]) / "print_times.jsonl").read_text().splitlines()]
    return [(s["t"], ast.literal_eval(s["line"].split("\r")[-1])) for s in lines
            if s["line"].split("\r")[-1].startswith("{'")], [s["line"] for s in lines]


def _log_history(run, printed):
    ws = Path(run["workspace"])
    if (ws / "log_history.json").exists():       # the GRPO script's trainer.state.log_history
        return json.loads((ws / "log_history.json").read_text())
    # `trl sft`: the last checkpoint's log_history, then the summary the trainer logs after it
    state = json.loads((ws / "output" / "sft" / f"checkpoint-{STEPS}" / "trainer_state.json").read_text())
    summary = [{k: float(v) for k, v in d.items()} for _, d in printed if "train_runtime" in d]   # printed as '3.95'
    return state["log_history"] + summary


@pytest.mark.parametrize("agent,kind", [("test-trl-sft-merged", "sft"), ("test-trl-grpo-merged", "grpo")])
def test_every_logged_point_is_stored_once_live_in_one_session(batch, agent, kind):
    db, runs, point_seen = batch
    run = runs[agent]
    assert run["state"] == "done", run["end_reason"]
    assert [r[0] for r in db.execute("SELECT status FROM submissions WHERE run_id=?", (run["id"],))] == ["scored"]
    printed, raw = _printed(run)
    # the streams really were merged: progress redraws precede the dicts on their lines
    assert sum("\r" in line for line in raw) >= STEPS // 2, raw[:3]
    history = _log_history(run, printed)
    assert len(history) == STEPS + 1 and SUMMARY <= history[-1].keys()
    expect: dict[str, list[float]] = {}
    for entry in history:
        for k, v in entry.items():
            if k not in NOT_STORED and isinstance(v, (int, float)):
                expect.setdefault(k, []).append(float(v))
    stored: dict[str, list[float]] = {}
    for r in db.execute("SELECT name, value FROM metrics WHERE run_id=? AND source <> 'grading' ORDER BY id",
                        (run["id"],)):
        stored.setdefault(r["name"], []).append(r["value"])
    assert set(stored) == set(expect), (set(stored) ^ set(expect))
    for name, values in expect.items():        # each exactly once, printed (4 digits) or exact
        assert [f"{v:.4g}" for v in stored[name]] == [f"{v:.4g}" for v in values], name
    sessions = [dict(s) for s in db.execute("SELECT * FROM training_sessions WHERE run_id=?", (run["id"],))]
    assert len(sessions) == 1 and sessions[0]["kind"] == kind and sessions[0]["ended_at"] is not None
    assert "stdout" in json.loads(sessions[0]["sources"])
    # live: every printed value reached the store within 5 s of coming through the pipe
    counts: dict[str, int] = {}
    lags = []
    for t, d in printed:
        for k in d:
            if k in NOT_STORED or k not in expect:
                continue
            n = counts.get(k, 0)
            counts[k] = n + 1
            lags.append(point_seen[(run["id"], k, n)] - t)
    lags.sort()
    p95 = lags[int(0.95 * (len(lags) - 1))]
    print(f"{agent}: {len(lags)} printed points, printed -> in the store median {lags[len(lags) // 2]:.2f}s "
          f"p95 {p95:.2f}s max {lags[-1]:.2f}s")
    assert len(lags) == sum(len(v) for v in expect.values())
    assert lags[-1] < 5.0, lags[-5:]

"""Training metrics from stock tools under the real engine (`--batch`): agents that run the real
`trl sft` command line with its default logging get a live curve from what TRL prints, each
printed loss stored exactly once (with `--report_to tensorboard` too), a second `trl sft` into the
same folder is a second session, and an agent whose metric files are a FIFO and links to
/dev/zero still ends `done` with its submission scored and the bad files recorded as its error."""

import ast
import json
import shutil
import sys

import pytest

from tests.support.harness import REPO, make_reachable_home, write_plan
from tests.support.store_watcher import watched_batch

pytestmark = pytest.mark.slow
AGENTS = ["test-trl-sft", "test-trl-sft-tb", "test-trl-sft-twice", "test-bad-metrics"]


@pytest.fixture(scope="module")
def batch(tiny_model_dir, tmp_path_factory):
    from autorl_tui.executors.agent_runtime import find as find_agent_runtime

    if shutil.which("trl", path=str(find_agent_runtime().bin_dir)) is None:
        pytest.skip("LOUD SKIP: the `trl` command line is not installed in the agent runtime (requirements/agent.txt)")
    home = make_reachable_home("autorl-metrics-")
    plan = write_plan(tmp_path_factory.mktemp("plan") / "plan.yaml", name="metrics-capture", agents=AGENTS,
                      budget="400s")
    watcher, db, runs = watched_batch(home, plan, tiny_model_dir)
    yield home, db, runs, watcher.first_seen
    db.close()
    shutil.rmtree(home.parent, ignore_errors=True)


def _printed(home, run):
    """The log-dict lines the agent's stdout holds (what TRL printed), parsed as TRL wrote them."""
    lines = (home / "runs" / run["id"] / "attempt-1" / "stdout.log").read_text().splitlines()
    return [ast.literal_eval(l) for l in lines if l.startswith("{'") and "'epoch'" in l]


def _stamps(run):
    from pathlib import Path

    path = Path(run["workspace"]) / "print_times.jsonl"
    return [json.loads(l) for l in path.read_text().splitlines()]


def _rows(db, sql, *args):
    return [dict(r) for r in db.execute(sql, args)]


def test_every_loss_trl_prints_is_one_point_stored_within_5s(batch):
    home, db, runs, first_seen = batch
    run = runs["test-trl-sft"]
    assert run["state"] == "done", run["end_reason"]
    printed = [d for d in _printed(home, run) if "loss" in d]
    assert len(printed) == 12                              # --max_steps 12 --logging_steps 1
    stored = _rows(db, "SELECT value, step, source, session_id FROM metrics WHERE run_id=? AND name='loss' "
                       "ORDER BY id", run["id"])
    assert len(stored) == len(printed)
    assert [f"{r['value']:.4g}" for r in stored] == [f"{float(d['loss']):.4g}" for d in printed]
    assert len({r["session_id"] for r in stored}) == 1
    # every other value TRL printed is one point too (epoch excepted: it is the x position)
    all_printed = sum(len([k for k in d if k != "epoch"]) for d in _printed(home, run))
    assert db.execute("SELECT count(*) FROM metrics WHERE run_id=? AND source <> 'grading'",
                      (run["id"],)).fetchone()[0] == all_printed
    session = dict(db.execute("SELECT * FROM training_sessions WHERE run_id=?", (run["id"],)).fetchone())
    assert session["kind"] == "sft" and "stdout" in json.loads(session["sources"])
    # the checkpoints' trainer_state.json (save_steps 5) refined the values and gave them steps
    assert [r["step"] for r in stored] == list(range(1, 13))
    # live: the first point was committed to the store within 5 s of TRL printing it
    first_print = min(s["t"] for s in _stamps(run))
    lag = first_seen[(run["id"], "loss")] - first_print
    print(f"first loss: printed -> in the store {lag:.2f}s")
    assert 0 < lag < 5.0, lag


def test_tensorboard_too_gives_the_same_points_not_double(batch):
    home, db, runs, _ = batch
    plain, tb = runs["test-trl-sft"], runs["test-trl-sft-tb"]
    assert tb["state"] == "done", tb["end_reason"]
    from pathlib import Path

    assert list(Path(tb["workspace"]).rglob("events.out.tfevents*")), "TensorBoard wrote no event file"
    count = "SELECT count(*) FROM metrics WHERE run_id=? AND name=?"
    for name in ("loss", "grad_norm", "learning_rate", "entropy"):
        assert db.execute(count, (tb["id"], name)).fetchone()[0] == db.execute(count, (plain["id"], name)).fetchone()[0] == 12
    names = {r["name"] for r in _rows(db, "SELECT DISTINCT name FROM metrics WHERE run_id=?", tb["id"])}
    assert not any(n.startswith("train/") for n in names), names     # train/loss ≡ loss
    assert db.execute("SELECT count(*) FROM training_sessions WHERE run_id=?", (tb["id"],)).fetchone()[0] == 1
    assert "tensorboard" in {r["source"] for r in _rows(db, "SELECT DISTINCT source FROM metrics WHERE run_id=?",
                                                         tb["id"])}


def test_two_sft_runs_into_one_folder_are_two_sessions(batch):
    home, db, runs, _ = batch
    run = runs["test-trl-sft-twice"]
    assert run["state"] == "done", run["end_reason"]
    sessions = _rows(db, "SELECT * FROM training_sessions WHERE run_id=? ORDER BY seq", run["id"])
    assert [(s["seq"], s["kind"]) for s in sessions] == [(1, "sft"), (2, "sft")]
    assert sessions[1]["started_at"] > sessions[0]["ended_at"]
    printed = [float(d["loss"]) for d in _printed(home, run) if "loss" in d]
    assert len(printed) == 24
    for s, expect in zip(sessions, (printed[:12], printed[12:])):
        got = [r["value"] for r in _rows(db, "SELECT value FROM metrics WHERE session_id=? AND name='loss' ORDER BY id",
                                          s["id"])]
        assert [f"{v:.4g}" for v in got] == [f"{v:.4g}" for v in expect]
        # both runs wrote output/sft/checkpoint-{5,10}/trainer_state.json: each session got its own
        assert any(src.startswith("trainer_state:output/sft/checkpoint-10") for src in json.loads(s["sources"]))


def test_fifo_and_dev_zero_metric_files_are_agent_errors_not_run_failures(batch):
    home, db, runs, _ = batch
    run = runs["test-bad-metrics"]
    assert run["state"] == "done", run["end_reason"]
    assert run["end_reason"] == "agent finished (exit code 0)"
    assert run["ended_at"] < run["deadline"]
    assert [s["status"] for s in _rows(db, "SELECT status FROM submissions WHERE run_id=?", run["id"])] == ["scored"]
    assert run["test_score"] is not None
    errors = _rows(db, "SELECT message, data FROM events WHERE run_id=? AND kind='error'", run["id"])
    paths = {json.loads(e["data"])["path"] for e in errors if json.loads(e["data"]).get("source") == "agent"}
    assert {"logs/metrics.jsonl", "output/run/checkpoint-1/trainer_state.json",
            "output/run/checkpoint-1/events.out.tfevents.1.host.1.0"} <= paths, errors
    assert all(e["message"].startswith("agent error: ") for e in errors)

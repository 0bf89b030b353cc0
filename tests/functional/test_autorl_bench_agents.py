"""An agent folder in AutoRL-Bench's format (start.sh + config.yaml) runs unchanged under --batch,
with the local and the docker executor: its env, its grading API answers, the scores.json mirror."""

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.support.harness import REPO, TASKS, cli, install_model, load_json, make_reachable_home, write_plan

pytestmark = pytest.mark.slow
PROBE_AGENT = REPO / "tests" / "data" / "autorl_bench" / "agents" / "probe"


@pytest.fixture
def home(tiny_model_dir):
    h = make_reachable_home()
    h.mkdir(parents=True)
    install_model(tiny_model_dir, h)
    yield h
    shutil.rmtree(h.parent, ignore_errors=True)


@pytest.mark.parametrize("executor", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_autorl_bench_agent_folder_runs_unchanged(executor, home, tmp_path, docker_available):
    if executor == "docker" and not docker_available:
        pytest.skip("DOCKER ENGINE NOT REACHABLE: the docker AutoRL-Bench agent test did not run")
    # The plan names the folder by its path, as AutoRL-Bench's `agents: [path/to/agents/claude]`.
    plan = write_plan(tmp_path / "plan.yaml", agents=[str(PROBE_AGENT)], budget="240s", executor=executor)
    proc = cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(plan), home=home, timeout=600)
    db = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    run = dict(db.execute("SELECT * FROM runs").fetchone())
    ws = Path(run["workspace"])
    log = (ws / "agent.log").read_text() if (ws / "agent.log").exists() else "(no agent.log)"
    assert proc.returncode == 0 and run["state"] == "done", (run["state"], run["end_reason"], log, proc.stderr[-3000:])
    assert run["agent"] == "probe"
    probe = load_json(ws / "probe.json")

    # Its env: the contract, config.yaml's env_vars under it (TASK stays the harness's).
    assert probe["note"] == "from config.yaml" and probe["task"] == "arith-small"
    # stdout and stderr went to agent.log in the workspace, as AutoRL-Bench's runner writes it
    assert "=== Probe Agent ===" in log and "probe done" in log

    first, again = probe["first"], probe["again"]
    for key in ("submission_id", "timestamp", "model_path", "score", "baseline_score", "improvement",
                "elapsed_seconds", "best", "total_submissions"):
        assert key in first, key
    assert first["best"]["submission_id"] == first["submission_id"] and first["best"]["score"] == first["score"]
    assert first["total_submissions"] == 1 and first["elapsed_seconds"] >= 0
    assert first["baseline_score"] == run["baseline_dev_score"]
    # The same folder again: the earlier response, unchanged (ours adds `duplicate`).
    assert again["duplicate"] is True
    assert {k: again[k] for k in first if k not in ("duplicate", "status", "run_elapsed_seconds")} == \
           {k: first[k] for k in first if k not in ("duplicate", "status", "run_elapsed_seconds")}

    # A model that cannot be graded: 200, score 0.0, `error` (and our code).
    broken = probe["broken"]
    assert probe["broken_code"] == "200" and broken["score"] == 0.0 and broken["error"], broken
    assert broken["code"] == "grading_failed" and broken["best"]["submission_id"] == first["submission_id"]
    assert broken["total_submissions"] == 2

    assert probe["missing_code"] == "400" and probe["missing"]["error"] == "Missing model_path"
    assert probe["bad_gpu_code"] == "400" and probe["bad_gpu"]["available_gpus"] == []
    health = probe["health"]
    assert health["status"] == "ok" and health["task"] == "arith-small" and health["workspace"] == str(ws)
    assert health["available_gpus"] == []
    t = probe["time"]
    assert t["timeout_s"] == 240 and t["start_time"] == int(run["started_at"]) and 0 < t["remaining"] <= 240
    assert t["last_submit_time"] is not None and t["end_time"] is None and int(probe["remaining"]) > 0

    # scores.json mirrored the ledger: the two graded entries (not the duplicate)
    assert [e["submission_id"] for e in probe["scores"]] == [first["submission_id"], broken["submission_id"]]
    assert probe["scores"][1]["score"] == 0.0 and probe["scores"][1]["error"]

    subs = [dict(r) for r in db.execute("SELECT * FROM submissions WHERE run_id=? ORDER BY seq", (run["id"],))]
    assert [s["status"] for s in subs] == ["scored", "duplicate", "error"]
    # The agent forged the mirror with a score of 100: the ledger and the result did not move.
    assert run["best_dev_score"] == first["score"] != 100.0 and run["best_submission_id"] == subs[0]["id"]
    assert run["test_score"] is not None

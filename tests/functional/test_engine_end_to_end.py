"""The headless engine end to end, through the real CLI: real subprocess agents, the real
grading API on loopback, the real grader worker on the real tiny model, a real SQLite store."""

import json
import sqlite3
from pathlib import Path

import pytest

from tests.support.harness import (REPO, TASKS, TEST_AGENTS, cli, home_with_tiny, load_json, sandbox_leftovers,
                                   write_plan)

pytestmark = pytest.mark.slow


@pytest.fixture
def home(tiny_model_dir):
    yield from home_with_tiny(tiny_model_dir)


def store(home: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    return conn


def test_scripted_agent_trains_submits_twice_and_export_reproduces_the_store(train_twice_home, tmp_path):
    home = train_twice_home      # `--batch` of baseline-copy and test-train-twice, shared with test_reports_batch
    db = store(home)
    run = dict(db.execute("SELECT * FROM runs WHERE agent = 'test-train-twice'").fetchone())
    assert run["state"] == "done", run
    subs = [dict(r) for r in db.execute("SELECT * FROM submissions WHERE run_id=? ORDER BY seq", (run["id"],))]
    assert [s["status"] for s in subs] == ["scored", "scored"]
    assert all(s["content_hash"] and s["snapshot_path"] and s["revision_id"] for s in subs)
    assert subs[0]["revision_id"] != subs[1]["revision_id"]   # code/ changed between the two
    n_dev = db.execute("SELECT COUNT(*) FROM samples WHERE split='dev' AND baseline_id = (SELECT MIN(baseline_id) "
                       "FROM samples WHERE split='dev')").fetchone()[0]     # one baseline's dev samples
    for s in subs:
        samples = db.execute("SELECT COUNT(*) FROM samples WHERE submission_id=? AND split='dev'", (s["id"],)).fetchone()[0]
        assert samples == n_dev > 0
    best = max(subs, key=lambda s: (s["score"], -s["seq"]))
    assert run["best_submission_id"] == best["id"] and run["best_dev_score"] == best["score"]
    n_test = db.execute("SELECT COUNT(*) FROM samples WHERE submission_id=? AND split='test'", (best["id"],)).fetchone()[0]
    assert n_test > 0 and run["test_score"] is not None
    assert abs(run["improvement"] - (run["test_score"] - run["baseline_score"])) < 1e-9
    # metrics written by the agent arrived with their names and steps
    losses = db.execute("SELECT step, value FROM metrics WHERE run_id=? AND name='loss' AND source='metrics_jsonl' "
                        "ORDER BY step", (run["id"],)).fetchall()
    assert [r[0] for r in losses] == list(range(40))
    states = [json.loads(r[0])["state"] for r in db.execute(
        "SELECT data FROM events WHERE run_id=? AND kind='state' ORDER BY id", (run["id"],))]
    assert states == ["queued", "preparing", "baseline", "running", "finalizing", "done"]
    assert db.execute("SELECT COUNT(*) FROM events WHERE run_id=? AND kind='stdout' AND message LIKE 'v1: %'",
                      (run["id"],)).fetchone()[0] == 1
    # the export reproduces the store
    out = tmp_path / "run.json"
    cli("export", run["id"], "--json", str(out), home=home, check=True)
    data = load_json(out)
    for key in ("baseline_score", "best_dev_score", "test_score", "improvement", "end_reason"):
        assert data[key] == run[key]
    assert [s["score"] for s in data["submissions"]] == [s["score"] for s in subs]
    for exported in data["submissions"]:
        assert len([x for x in exported["samples"] if x["split"] == "dev"]) == n_dev
    assert len(data["events"]) == db.execute("SELECT COUNT(*) FROM events WHERE run_id=?", (run["id"],)).fetchone()[0]
    listed = json.loads(cli("runs", "list", "--json", home=home, check=True).stdout)
    assert sorted(r["id"] for r in listed) == sorted(r[0] for r in db.execute("SELECT id FROM runs"))
    assert run["id"] in [r["id"] for r in listed] and len(listed) == 2
    # the task card's protocol and the data's origin travel with the run (a single-protocol card: `default`)
    assert json.loads(run["spec"])["protocol_name"] == "default"
    assert data["protocol"] == "default" and data["data_origin"] == {"kind": "generated", "stand_in": True}
    assert {r["protocol"] for r in listed} == {"default"}


def test_every_grading_event_records_where_and_how_it_ran(train_twice_home):
    """The placement decision (grading/placement.py) and what the worker ran travel in each
    grading's end event; runs without GPUs grade on the CPU with transformers, and say why."""
    db = store(train_twice_home)
    ends = [json.loads(r[0]) for r in db.execute("SELECT data FROM events WHERE kind='grading' ORDER BY id")]
    ends = [d for d in ends if d.get("phase") == "end"]
    assert len(ends) >= 6          # per run: baselines (or cached), submissions, the held-out test
    for data in ends:
        place = data["placement"]
        assert (place["backend"], place["device"], place["placement"], place["devices"]) == \
            ("transformers", "cpu", "cpu", []), place
        assert place["device_used"] == "cpu" and place["reason"] == "no GPU for this grading"
        assert place["max_model_len"] > 0 and "fallback" not in place


def test_integrity_rules_of_the_grading_api(home, tmp_path):
    plan = write_plan(tmp_path / "plan.yaml", agents=["test-integrity"], budget="120s")
    # The agent is told where the harness keeps private things and tries to read them.
    probe_paths = [home / "store.db", home / "cache", home / "snapshots", home / "runs", REPO / "autorl_tui" / "tasks" / "arith", TASKS / "arith-small"]
    proc = cli("--agents-dir", str(TEST_AGENTS), "--tasks-dir", str(TASKS), "--plain", "--batch", str(plan), home=home, timeout=400,
               env={"PROBE_PATHS": ":".join(map(str, probe_paths))})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    db = store(home)
    run = dict(db.execute("SELECT * FROM runs").fetchone())
    probe = load_json(Path(run["workspace"]) / "logs" / "probe.json")
    assert probe["outside"][0] == 400 and probe["outside"][1]["code"] == "outside_output"
    assert probe["dotdot"][0] == 400 and probe["dotdot"][1]["code"] == "outside_output"
    assert probe["symlink"][0] == 400 and probe["symlink"][1]["code"] == "symlink_out"
    assert probe["inner_link"][0] == 400 and "output/v1/inner-link is a symbolic link" in probe["inner_link"][1]["error"]
    assert probe["empty"][0] == 400 and probe["empty"][1]["code"] == "empty"
    assert probe["lora"][0] == 400 and "merge" in probe["lora"][1]["error"]
    assert probe["garbage"][0] == 400 and probe["garbage"][1]["code"] == "bad_json"
    assert probe["no_path"][0] == 400
    assert probe["valid"][0] == 200 and probe["valid"][1]["score"] is not None
    dup = probe["duplicate"][1]
    assert probe["duplicate"][0] == 200 and dup["duplicate"] and dup["score"] == probe["valid"][1]["score"]
    assert probe["time"]["remaining_seconds"] > 0
    assert probe["wrong_token"] == 404
    # rejected submissions are recorded with their reasons (the drops manifest), not dropped; a
    # request that names no folder at all (garbage, no model_path) leaves no row
    rows = [dict(r) for r in db.execute("SELECT status, error FROM submissions ORDER BY seq")]
    assert [r["status"] for r in rows] == ["rejected"] * 6 + ["scored", "duplicate"]
    assert all(r["error"] for r in rows[:6])
    # the agent's environment holds the contract and nothing of the harness
    env = probe["env"]
    for key in ("TASK", "BASE_MODEL", "MODEL_PATH", "DATA_PATH", "OUTPUT_DIR", "WORKSPACE", "GRADING_SERVER_URL",
                "METRICS_FILE", "CUDA_VISIBLE_DEVICES"):
        assert key in env
    for key, value in env.items():
        if key == "PROBE_PATHS":   # passed through on purpose (named in the spec's env)
            continue
        assert "store.db" not in value and str(home / "cache") not in value, (key, value)
        assert not key.startswith("AUTORL") and key not in ("PYTEST_CURRENT_TEST", "VIRTUAL_ENV")
    # nothing private is readable: unreadable (other uid) or hidden (empty in its mount namespace)
    for path, seen in probe["readable"].items():
        assert seen in ([], 0) or str(seen).startswith("error"), (path, seen)
    assert probe["readable"][str(home / "store.db")] in (0,) or "error" in str(probe["readable"][str(home / "store.db")])
    ws = Path(run["workspace"])
    assert not any((ws / "data").rglob("*dev*")) and not any((ws / "data").rglob("*test*"))


def test_an_agent_that_ignores_its_budget_dies_with_its_setsid_child(home, tmp_path):
    plan = write_plan(tmp_path / "plan.yaml", agents=["test-budget-hog"], budget="8s")
    proc = cli("--agents-dir", str(TEST_AGENTS), "--tasks-dir", str(TASKS), "--plain", "--batch", str(plan), home=home, timeout=300)
    assert proc.returncode == 1   # no valid submission: the run fails (source: budget)
    db = store(home)
    run = dict(db.execute("SELECT * FROM runs").fetchone())
    assert run["state"] == "failed" and run["failure_source"] == "budget"
    assert run["ended_at"] - run["started_at"] < 8 + 10
    logs = Path(run["workspace"]) / "logs"
    assert (logs / "agent.pid").exists() and (logs / "grandchild.pid").exists()   # both were started
    # Their pids are the sandbox's own (a PID namespace); what must be gone is every process of the
    # run's sandbox uid, the setsid grandchild included.
    left = sandbox_leftovers(home / "runs" / run["id"] / "attempt-1")
    assert not left, left
    attempt = dict(db.execute("SELECT * FROM attempts").fetchone())
    assert attempt["state"] == "killed" and attempt["exit_code"] < 0


def test_bad_plan_exits_2_and_writes_nothing(home, tmp_path):
    plan = write_plan(tmp_path / "plan.yaml", agents=["no-such-agent"])
    proc = cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(plan), home=home)
    assert proc.returncode == 2
    assert "unknown agent 'no-such-agent'" in proc.stderr
    db = store(home)
    assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0

"""kill -9 the engine during the agent phase; a new engine re-adopts the agent and the run
completes with every earlier event and submission intact."""

import shutil
import os
import signal
import sqlite3
import subprocess
import sys

import pytest
from functools import partial

from tests.support.harness import REPO, TASKS, TEST_AGENTS, cli, install_model, make_reachable_home, write_plan
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow


def _db(home):
    conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True, timeout=10)
    conn.row_factory = sqlite3.Row
    return conn


# The engine writes the store meanwhile: a locked read means "not yet".
_wait_for = partial(wait_for, interval=0.3, tolerate=(sqlite3.Error,))


@pytest.mark.parametrize("executor", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_engine_killed_mid_run_is_recovered(executor, tiny_model_dir, tmp_path, docker_available):
    if executor == "docker" and not docker_available:
        pytest.skip("DOCKER ENGINE NOT REACHABLE: the docker crash test did not run")
    home = make_reachable_home()
    home.mkdir(parents=True)
    install_model(tiny_model_dir, home)
    plan = write_plan(tmp_path / "plan.yaml", agents=["test-crash-probe"], budget="180s", executor=executor)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "autorl_tui", "--home", str(home), "--agents-dir", str(TEST_AGENTS),
           "--tasks-dir", str(TASKS), "--plain", "--batch", str(plan)]
    engine = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: _db(home).execute("SELECT COUNT(*) FROM submissions WHERE status='scored'").fetchone()[0] == 1,
                  240, "submission 1 to be scored")
        _wait_for(lambda: _db(home).execute("SELECT COUNT(*) FROM events WHERE message LIKE 'tick %'").fetchone()[0] >= 3,
                  60, "ticks")
    finally:
        engine.send_signal(signal.SIGKILL)
        engine.wait()
    before = _db(home)
    events_before = [tuple(r) for r in before.execute("SELECT id, kind, message FROM events ORDER BY id")]
    sub_before = dict(before.execute("SELECT * FROM submissions WHERE seq=1").fetchone())
    assert before.execute("SELECT state FROM runs").fetchone()[0] == "running"
    before.close()
    proc = cli("--agents-dir", str(TEST_AGENTS), "--tasks-dir", str(TASKS), "--plain", "resume", home=home, timeout=400)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    db = _db(home)
    run = dict(db.execute("SELECT * FROM runs").fetchone())
    assert run["state"] == "done", run
    events_after = [tuple(r) for r in db.execute("SELECT id, kind, message FROM events ORDER BY id")]
    assert events_after[:len(events_before)] == events_before          # nothing recorded before was lost
    ticks = [m for _, k, m in events_after if k == "stdout" and m.startswith("tick ")]
    assert ticks == [f"tick {i}" for i in range(40)]                     # no line lost or duplicated
    metric_steps = [r[0] for r in db.execute("SELECT step FROM metrics WHERE name='tick' ORDER BY id")]
    assert metric_steps == list(range(40))
    subs = [dict(r) for r in db.execute("SELECT * FROM submissions ORDER BY seq")]
    assert subs[0]["score"] == sub_before["score"] and subs[0]["content_hash"] == sub_before["content_hash"]
    assert [s["status"] for s in subs] == ["scored", "scored"]
    assert run["test_score"] is not None
    assert any("re-adopted" in m for _, _, m in events_after)
    shutil.rmtree(home.parent, ignore_errors=True)

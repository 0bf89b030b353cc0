"""`--batch PLAN` while the console's background engine owns the home: the plan is handed to that
engine over its socket and followed to the end, instead of failing on the lock."""

import shutil
import sqlite3

import pytest

from tests.support.harness import TASKS, cli, install_model, make_reachable_home, write_plan

pytestmark = pytest.mark.slow


def test_batch_hands_the_plan_to_the_running_engine(tiny_model_dir, tmp_path):
    home = make_reachable_home()
    home.mkdir(parents=True)
    install_model(tiny_model_dir, home)
    env = {"AUTORL_TASKS_DIR": str(TASKS)}
    cli("engine", "start", home=home, env=env, check=True, timeout=60)
    try:
        plan = write_plan(tmp_path / "plan.yaml", budget="60s")
        proc = cli("--plain", "--batch", str(plan), home=home, env=env, timeout=400)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "handed to the running engine" in proc.stdout
        assert "done" in proc.stdout
        status = cli("engine", "status", home=home, env=env)
        assert status.returncode == 0      # the engine is still there after the batch ended
    finally:
        cli("engine", "stop", home=home, env=env, timeout=60)
    db = sqlite3.connect(home / "store.db")
    assert db.execute("SELECT state, improvement FROM runs").fetchall() == [("done", 0.0)]
    shutil.rmtree(home.parent, ignore_errors=True)

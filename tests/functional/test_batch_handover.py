"""`--batch PLAN` while the console's background engine owns the home: the plan is handed to that
engine over its socket and followed to the end, instead of failing on the lock."""

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading

import pytest

from tests.support.harness import REPO, TASKS, cli, install_model, make_reachable_home, write_plan

pytestmark = pytest.mark.slow


def engine_home(tiny_model_dir):
    """A home with the tiny model and its background engine started (the console's)."""
    home = make_reachable_home()
    home.mkdir(parents=True)
    install_model(tiny_model_dir, home)
    env = {"AUTORL_TASKS_DIR": str(TASKS)}
    cli("engine", "start", home=home, env=env, check=True, timeout=60)
    return home, env


def test_batch_hands_the_plan_to_the_running_engine(tiny_model_dir, tmp_path):
    home, env = engine_home(tiny_model_dir)
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


@pytest.mark.xfail(strict=False, reason="seen once to exit 0 instead of 130 under -n 2 on 2 cores after the 2026-11-27 merges (passes alone); under investigation")
def test_ctrl_c_on_a_handed_over_batch_names_the_runs_that_go_on(tiny_model_dir, tmp_path):
    home, env = engine_home(tiny_model_dir)
    try:
        plan = write_plan(tmp_path / "plan.yaml", budget="60s", seeds=[0, 1])
        proc = subprocess.Popen([sys.executable, "-m", "autorl_tui", "--home", str(home), "--plain", "--batch", str(plan)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTHONPATH=str(REPO), **env), cwd=REPO)
        handed = threading.Event()

        def watch():
            for line in proc.stdout:
                if "handed to the running engine" in line:
                    handed.set()
        threading.Thread(target=watch, daemon=True).start()
        assert handed.wait(300), "the plan was never handed over"
        proc.send_signal(signal.SIGINT)
        err = proc.stderr.read()
        assert proc.wait(60) == 130, err
        ids = [r for (r,) in sqlite3.connect(home / "store.db").execute("SELECT id FROM runs ORDER BY id")]
        assert len(ids) == 2
        assert "its runs go on in the engine" in err and all(r in err for r in ids), err
        assert f"autorl-tui cancel {ids[0]} {ids[1]}" in err, err
        states = dict(sqlite3.connect(home / "store.db").execute("SELECT id, state FROM runs").fetchall())
        assert "cancelled" not in states.values(), states        # Ctrl-C stopped following, not the runs
    finally:
        cli("engine", "stop", "--cancel-runs", home=home, env=env, timeout=120)
    shutil.rmtree(home.parent, ignore_errors=True)

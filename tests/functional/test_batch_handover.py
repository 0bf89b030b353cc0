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


def _hand_over_and_interrupt(plan, home, env, inherit_ignored: bool) -> tuple[int, str, list[str]]:
    """Start `--batch PLAN`, wait until it says the plan was handed over, send SIGINT: (exit code,
    stderr, the plan's run ids). `inherit_ignored`: the process starts with SIGINT ignored, as a
    background job of a non-interactive shell does (`make test > log &`): Ctrl-C must still work."""
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if inherit_ignored else None
    proc = subprocess.Popen([sys.executable, "-m", "autorl_tui", "--home", str(home), "--plain", "--batch", str(plan)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ignore,
                            env=dict(os.environ, PYTHONPATH=str(REPO), **env), cwd=REPO)
    handed: list[str] = []
    said = threading.Event()

    def watch():
        for line in proc.stdout:
            if "handed to the running engine: " in line:
                handed.extend(line.split("handed to the running engine: ", 1)[1].strip().split(", "))
                said.set()
    threading.Thread(target=watch, daemon=True).start()
    if not said.wait(300):
        proc.kill()
        pytest.fail("the plan was never handed over")
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=60)       # it stops following at once (it used to follow to the end)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, err, handed


def test_ctrl_c_on_a_handed_over_batch_names_the_runs_that_go_on(tiny_model_dir, tmp_path):
    home, env = engine_home(tiny_model_dir)
    try:
        plan = write_plan(tmp_path / "plan.yaml", budget="60s", seeds=[0, 1])
        seen = []
        for inherit_ignored in (True, False):
            code, err, ids = _hand_over_and_interrupt(plan, home, env, inherit_ignored)
            assert code == 130, (inherit_ignored, err)
            assert len(ids) == 2 and "its runs go on in the engine" in err and all(r in err for r in ids), err
            assert f"autorl-tui cancel {ids[0]} {ids[1]}" in err, err
            seen += ids
        stored = dict(sqlite3.connect(home / "store.db").execute("SELECT id, state FROM runs").fetchall())
        assert sorted(stored) == sorted(seen), (stored, seen)
        assert "cancelled" not in stored.values(), stored        # Ctrl-C stopped following, not the runs
    finally:
        cli("engine", "stop", "--cancel-runs", home=home, env=env, timeout=120)
    shutil.rmtree(home.parent, ignore_errors=True)

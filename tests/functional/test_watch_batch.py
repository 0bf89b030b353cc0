"""A plan run by `--batch` (or `demo`) can be watched: its in-process engine serves the home's
socket while it runs, so `engine status` sees it and a console attaches (it said no engine ran
while the console said another engine owned the home); `engine stop` says how to stop it."""

import os
import subprocess
import sys
import threading

import pytest

from tests.support.harness import REPO, TASKS, cli, home_with_tiny, write_plan

pytestmark = pytest.mark.slow


@pytest.fixture
def home(tiny_model_dir):
    yield from home_with_tiny(tiny_model_dir)


def test_a_running_batch_answers_engine_status_and_refuses_engine_stop_with_the_way(home, tmp_path):
    plan = write_plan(tmp_path / "plan.yaml", budget="60s")
    env = {"AUTORL_TASKS_DIR": str(TASKS)}
    proc = subprocess.Popen([sys.executable, "-m", "autorl_tui", "--home", str(home), "--plain", "--batch", str(plan)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO), **env), cwd=REPO)
    started = threading.Event()
    out: list[str] = []

    def watch():
        for line in proc.stdout:
            out.append(line)
            if "preparing" in line:
                started.set()
    threading.Thread(target=watch, daemon=True).start()
    try:
        assert started.wait(300), "".join(out)
        status = cli("engine", "status", home=home, env=env, timeout=60)
        assert status.returncode == 0, status.stdout + status.stderr
        assert f"engine pid {proc.pid} (inside `autorl-tui --batch`)" in status.stdout, status.stdout
        stop = cli("engine", "stop", home=home, env=env, timeout=60)
        assert stop.returncode == 2 and "Traceback" not in stop.stderr, stop.stderr
        assert "Ctrl-C" in stop.stderr and str(proc.pid) in stop.stderr
        assert proc.wait(400) == 0, "".join(out) + proc.stderr.read()      # the batch itself goes on to its end
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not (home / "engine.sock").exists()          # the socket went with the batch's engine

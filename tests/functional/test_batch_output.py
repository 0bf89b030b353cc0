"""What a headless run prints when its output is not a terminal (CI logs): what preparation is
doing, progress over the plan, and a closing "next" section whose commands work as printed; the
store left behind is whole in store.db; Ctrl-C says how to retry."""

import json
import os
import shlex
import shutil
import signal
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


def _cli(*args, timeout=600):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "autorl_tui", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)


def test_demo_output_shows_preparation_progress_and_a_next_section_that_works(home, tmp_path):
    plan = write_plan(tmp_path / "plan.yaml", name="cux-demo", budget="60s")
    proc = _cli("--home", str(home), "--tasks-dir", str(TASKS), "demo", "--plan", str(plan))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    run_id = next(line.split()[3] for line in out.splitlines() if line.strip().startswith("report "))
    # preparation says what it does, step by step, with its progress
    assert f"{run_id}: preparing: model tiny: locating" in out, out
    assert f"{run_id}: preparing: task arith-small: materializing split dev: 1/3" in out, out
    assert f"{run_id}: baseline on dev: grading the base model on 40 sample(s)" in out, out
    assert f"{run_id}: baseline on test: grading the base model on 40 sample(s)" in out, out
    # progress over the plan's runs
    assert "1/1 run(s) finished" in out and f"best dev: {run_id.split('-')[0]} " in out, out
    # the next section: every command runs as printed (here: from another folder than the repo)
    nxt = out[out.index("\nnext:"):].splitlines()[1:]
    commands = [line.split(None, 1)[1] for line in nxt if line.split()[0] in ("report", "runs")]
    assert len(commands) == 2, nxt
    for command in commands:
        argv = shlex.split(command)
        assert argv[0] == "autorl-tui"
        ran = subprocess.run([sys.executable, "-m", "autorl_tui", *argv[1:]], capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=str(REPO)), cwd=tmp_path, timeout=300)
        assert ran.returncode == 0, (command, ran.stderr)
        assert run_id in ran.stdout, (command, ran.stdout)
    export = next(line.split()[1] for line in nxt if line.split()[0] == "export")
    assert os.path.exists(export) and run_id in export
    # the printed report command (run above) did not write over the export the list names
    with open(export) as fh:
        exported = json.load(fh)
    assert exported["format"] and exported["run_id"] == run_id and "events" in exported, sorted(exported)[:10]
    # store.db alone is the whole record once the engine stopped (no -wal needed)
    alone = tmp_path / "copy" / "store.db"
    alone.parent.mkdir()
    shutil.copyfile(home / "store.db", alone)
    if shutil.which("sqlite3"):
        q = subprocess.run(["sqlite3", str(alone), "select count(*) from runs"], capture_output=True, text=True, timeout=60)
        assert q.returncode == 0 and q.stdout.strip() == "1", q
    conn = sqlite3.connect(f"file:{alone}?mode=ro", uri=True)
    assert conn.execute("select count(*), max(state) from runs").fetchone() == (1, "done")
    assert conn.execute("select count(*) from events where run_id=?", (run_id,)).fetchone()[0] > 5


def _db_state(home):
    try:
        conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True, timeout=5)
        try:
            row = conn.execute("SELECT state FROM runs").fetchone()
        finally:
            conn.close()
        return row[0] if row else None
    except sqlite3.Error:
        return None


def _signal_state(pid: int) -> str:
    """The signal masks of a live process (pending, blocked, ignored, caught), for a failure's message."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError as exc:
        return f"unreadable ({exc})"
    return "; ".join(line.replace("\t", " ") for line in lines if line.startswith(("ShdPnd", "SigPnd", "SigBlk",
                                                                                     "SigIgn", "SigCgt")))


def _interrupt_batch_once_running(home, tasks, plan, start_within_s: float) -> tuple[int, str, str]:
    """Run `--batch PLAN` (stdout not a TTY) and send it Ctrl-C once its run is `running`."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    batch = subprocess.Popen([sys.executable, "-m", "autorl_tui", "--home", str(home), "--agents-dir", str(TEST_AGENTS),
                              "--tasks-dir", str(tasks), "--batch", str(plan)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    try:
        deadline = time.monotonic() + start_within_s
        while _db_state(home) != "running":
            assert batch.poll() is None and time.monotonic() < deadline, "the run never started"
            time.sleep(0.3)
        batch.send_signal(signal.SIGINT)
        try:
            out, err = batch.communicate(timeout=180)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"Ctrl-C did not end the batch within 180 s; its signal state then: "
                                 f"{_signal_state(batch.pid)}\nstdout so far:\n{exc.stdout}") from None
    finally:
        if batch.poll() is None:
            batch.kill()
    return batch.returncode, out, err


def test_batch_shows_baseline_progress_in_samples_and_ctrl_c_cancels_and_resume_says_how_to_retry(home, tmp_path):
    """The baseline's grading prints samples done / total as the grader's batches finish (batches
    of 10 here, so that 40 samples take several steps); stopped once the agent runs. Then Ctrl-C
    cancels the run and says how to retry it, and `resume` finds nothing to resume. (One run serves
    both: each would otherwise prepare and grade a baseline of its own.)"""
    tasks = tmp_path / "tasks"
    shutil.copytree(TASKS / "arith-small", tasks / "arith-small")
    card = tasks / "arith-small" / "task.yaml"
    card.write_text(card.read_text().replace("batch_size: 50", "batch_size: 10"))
    plan = write_plan(tmp_path / "plan.yaml", agents=["test-budget-hog"], budget="300s")
    returncode, out, err = _interrupt_batch_once_running(home, tasks, plan, start_within_s=400)
    for split in ("dev", "test"):
        dones = [int(line.rsplit(" grading ", 1)[1].split("/")[0]) for line in out.splitlines()
                 if f"baseline on {split}: grading " in line and line.endswith("/40 samples")]
        # How many intermediate lines show depends on speed (the client polls the worker's file every
        # 0.5 s; a fast grading may end between two polls): every line shown is a batch boundary.
        assert dones, out
        assert dones == sorted(set(dones)) and dones[-1] == 40, (split, dones, out)
        assert all(d % 10 == 0 for d in dones), dones       # one step per batch
    assert returncode == 130, out + err
    assert "Traceback" not in out + err
    assert "retry RUN" in err and f"--home {home}" in err, err
    assert _db_state(home) == "cancelled"
    proc = _cli("--home", str(home), "--agents-dir", str(TEST_AGENTS), "--tasks-dir", str(tasks), "resume")
    assert proc.returncode == 0, proc.stderr
    run_id = subprocess.run(["sqlite3", str(home / "store.db"), "select id from runs"], capture_output=True,
                            text=True).stdout.strip() if shutil.which("sqlite3") else None
    assert "nothing to resume" in proc.stdout and "cancelled" in proc.stdout, proc.stdout
    assert f"retry {run_id}" in proc.stdout if run_id else "retry r0001" in proc.stdout
    assert "press r" in proc.stdout


def test_a_plain_batch_says_where_a_quiet_run_is_while_its_agent_works(home, tmp_path):
    plan = write_plan(tmp_path / "plan.yaml", name="quiet", budget="25s", agents=[str(TEST_AGENTS / "budget_hog.yaml")])
    env = dict(os.environ, PYTHONPATH=str(REPO), AUTORL_PLAIN_HEARTBEAT_S="3")
    proc = subprocess.run([sys.executable, "-m", "autorl_tui", "--home", str(home), "--tasks-dir", str(TASKS),
                           "--plain", "--batch", str(plan)], capture_output=True, text=True, timeout=600, env=env,
                          cwd=REPO)
    beats = [line for line in proc.stdout.splitlines() if ": running " in line and "best dev" in line]
    assert beats, proc.stdout
    assert any("last output: still here" in line for line in beats), beats
    assert any("/25s" in line for line in beats), beats          # elapsed against the budget

"""Operator cancel takes effect in every state: a run cancelled while its task is still being
materialized ends `cancelled` at once and its prepare worker dies with it (it used to go on for
minutes, the header still `preparing`); `engine stop --cancel-runs` ends queued runs too; and
`autorl-tui cancel` does it from the shell, with or without an engine."""

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autorl_tui.catalog.plans import parse_plan
from autorl_tui.engine.engine import Engine
from autorl_tui.home import Home
from autorl_tui.store.queries import StoreReader
from tests.support.harness import REPO, TASKS, home_with_tiny

pytestmark = pytest.mark.slow

# A task whose materialization never ends by itself: it says it started (its pid), then waits.
STUCK_PROVIDER = '''
import os, pathlib, time

def materialize(card, split, out_dir):
    marker = pathlib.Path(os.environ["STUCK_MARKER"])
    marker.write_text(str(os.getpid()))
    while True:
        time.sleep(0.2)
'''


def plan_text(task: str, seeds=(0,)) -> str:
    return (f"name: cancels\ntasks: [{task}]\nagents: [baseline-copy]\nmodels: [tiny]\nseeds: {list(seeds)}\n"
            "budget: 60s\nexecutor: local\nisolation: none\n")


@pytest.fixture
def home(tiny_model_dir):
    yield from home_with_tiny(tiny_model_dir)


@pytest.fixture
def stuck_tasks(tmp_path, monkeypatch):
    tasks = tmp_path / "tasks"
    task = tasks / "stuck"
    task.mkdir(parents=True)
    shutil.copy(TASKS / "arith-small" / "description.md", task / "description.md")
    (task / "provider.py").write_text(STUCK_PROVIDER)
    (task / "task.yaml").write_text(
        "id: stuck\nname: never finishes materializing\nlevel: 1\nscorer: exact_match\nprimary_metric: accuracy\n"
        "protocol: {max_tokens: 8}\ndata:\n  provider: python\n  function: provider:materialize\n"
        "  splits: {train: {}, dev: {}, test: {}}\nbudget: 2m\nversion: '1'\n")
    marker = tmp_path / "stuck.pid"
    monkeypatch.setenv("STUCK_MARKER", str(marker))
    return tasks, marker


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")


def test_cancel_while_preparing_ends_the_run_and_its_worker_at_once(home, stuck_tasks):
    tasks, marker = stuck_tasks

    async def scenario():
        engine = Engine(Home(home), tasks_dirs=[tasks, TASKS])
        await engine.start()
        try:
            [rid] = await engine.enqueue_plan(parse_plan(plan_text("stuck")))
            deadline = time.monotonic() + 120
            while not marker.exists() or not marker.read_text():
                assert time.monotonic() < deadline, engine.store.run(rid)["state"]
                await asyncio.sleep(0.05)
            assert engine.store.run(rid)["state"] == "preparing"
            pid = int(marker.read_text())
            t0 = time.monotonic()
            await engine.cancel(rid, "operator test")
            [row] = await asyncio.wait_for(engine.wait_runs([rid]), 30)
            return rid, row, pid, time.monotonic() - t0
        finally:
            await engine.stop()

    rid, row, pid, took = asyncio.run(scenario())
    assert row["state"] == "cancelled" and row["failure_source"] == "user", row
    assert "operator test" in row["end_reason"]
    assert not _alive(pid), "the prepare worker outlived the cancel"
    rows = _events(home, rid)
    assert any(e["kind"] == "operator" and "cancel requested in state preparing" in e["message"] for e in rows), rows
    print(f"cancel while preparing took effect in {took:.2f}s")


def _events(home, rid):
    import sqlite3

    conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT kind, message FROM events WHERE run_id=? ORDER BY id", (rid,))]
    finally:
        conn.close()


def test_engine_stop_with_cancel_runs_ends_queued_runs_too(home):
    async def scenario():
        engine = Engine(Home(home), tasks_dirs=[TASKS])
        await engine.start()
        engine.queue_paused = True
        ids = await engine.enqueue_plan(parse_plan(plan_text("arith-small", seeds=(0, 1))))
        await engine.stop(cancel_runs=True)
        return ids

    ids = asyncio.run(scenario())
    with StoreReader.open(home / "store.db") as reader:
        assert [reader.run(rid).state for rid in ids] == ["cancelled", "cancelled"]


def test_cancel_command_without_an_engine(home):
    async def queue_two():
        engine = Engine(Home(home), tasks_dirs=[TASKS])
        await engine.start()
        engine.queue_paused = True
        ids = await engine.enqueue_plan(parse_plan(plan_text("arith-small", seeds=(0, 1))))
        await engine.stop()                     # the runs stay queued in the store
        return ids

    ids = asyncio.run(queue_two())
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "autorl_tui", "--home", str(home), "--tasks-dir", str(TASKS),
                           "cancel", ids[0][:5]], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"{ids[0]}: queued → cancelled" in proc.stdout
    with StoreReader.open(home / "store.db") as reader:
        assert reader.run(ids[0]).state == "cancelled"
        assert reader.run(ids[1]).state == "queued"          # only the named run; nothing else started
    again = subprocess.run([sys.executable, "-m", "autorl_tui", "--home", str(home), "cancel", ids[0]],
                           capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 2 and "Traceback" not in again.stderr
    assert "already ended" in again.stderr and "cancelled" in again.stderr

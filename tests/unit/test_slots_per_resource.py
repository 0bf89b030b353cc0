"""CPU-only runs do not take GPU slots: a control agent or an API-driven agent (gpus_per_run 0)
takes one of the engine's CPU slots (its concurrency), a GPU run its GPUs; neither counts
against the other (engine/scheduling.py, Engine._plan_local_starts)."""

from __future__ import annotations

import asyncio

from autorl_tui.engine.engine import Engine
from autorl_tui.engine.scheduling import ActiveRun, QueuedRun, decide
from autorl_tui.home import Home
from autorl_tui.store import Store


def test_cpu_only_runs_take_cpu_slots_and_gpu_runs_gpus():
    queue = [QueuedRun("cpu1", 0, queue_pos=1), QueuedRun("cpu2", 0, queue_pos=2), QueuedRun("cpu3", 0, queue_pos=3),
             QueuedRun("gpu1", 1, queue_pos=4), QueuedRun("gpu2", 1, queue_pos=5)]
    d = decide(queue, ["0", "1"], now=0.0, free_cpu_slots=2, inventory=["0", "1"])
    assert d.starts == [("cpu1", []), ("cpu2", []), ("gpu1", ["0"]), ("gpu2", ["1"])]
    assert d.waiting == {"cpu3": "no free CPU slot (concurrency limit)"}


def test_gpu_runs_leave_the_cpu_slots_free():
    active = [ActiveRun("g", ("0",), None)]
    d = decide([QueuedRun("cpu1", 0)], ["1"], now=0.0, active=active, free_cpu_slots=1)
    assert d.starts == [("cpu1", [])]


def _queue(store: Store, runs: list[tuple[str, int]], executor: str = "local") -> None:
    store.add_plan("p1", "slots", "", 0.0)
    for i, (run_id, gpus) in enumerate(runs):
        store.add_run({"id": run_id, "plan_id": "p1", "plan_name": "slots", "task": "arith", "level": 1,
                       "agent": "a", "model": "tiny", "driver": None, "seed": 0, "budget_s": 60.0,
                       "executor": executor, "gpus_requested": gpus, "priority": 0, "queue_pos": i,
                       "state": "queued", "created_at": float(i), "spec": {"executor": executor, "options": {}}})
    store.flush()


def _plan(tmp_path, runs, executor: str = "local") -> list:
    async def go():
        home = Home(tmp_path / "home")
        home.ensure()
        engine = Engine(home, concurrency=2, gpus=["0"])
        engine.store = Store(home.store_path)
        try:
            _queue(engine.store, runs, executor)
            return engine._plan_starts()
        finally:
            engine.store.close()

    return asyncio.run(go())


def test_an_engine_with_one_gpu_starts_its_cpu_only_runs_beside_the_gpu_run(tmp_path):
    """Before, every run took one of len(GPUs) slots: with one GPU, one run at a time."""
    starts = _plan(tmp_path, [("control", 0), ("api-agent", 0), ("third", 0), ("trainer", 1)])
    assert starts == [("control", []), ("api-agent", []), ("trainer", ["0"])]


def test_a_run_of_an_executor_no_longer_installed_does_not_stop_the_planning(tmp_path):
    """It takes a host slot, and its start then fails with the reason (as before the executor seam)."""
    assert _plan(tmp_path, [("orphan", 0)], executor="k8s-uninstalled") == [("orphan", [])]

"""`resume` while the Ray cluster is unreachable, on a real head (`ray start --head`): an engine
stops while a Ray run's agent ticks, the head is killed (every process of it: the actor too),
and a new engine starts on the home with the head still down. The run waits (`waiting for
cluster`), neither failed nor its attempt closed; when a head is started again on the same
address, the attempt is closed `lost` (the actor did not survive its head) and the run is retried
as attempt 2 of the same run id, and ends `done`."""

import asyncio
import os
import time

import pytest

from autorl_tui.catalog.plans import parse_plan
from tests.support.harness import TASKS
from tests.support.ray_cluster import ray_home, retrying_engine  # noqa: F401 (fixture)
from tests.support.ray_head import RayHead, free_port

pytestmark = [pytest.mark.slow, pytest.mark.long]   # minutes: make test-long (CI time)


async def _until(check, timeout_s: float, what: str) -> None:
    t0 = time.time()
    while not check():
        assert time.time() - t0 < timeout_s, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


def _messages(store, run_id, kind=None):
    rows = store.query("SELECT kind, message FROM events WHERE run_id=? ORDER BY id", (run_id,))
    return [r["message"] for r in rows if kind is None or r["kind"] == kind]


def test_resume_with_the_head_down_waits_then_the_run_finishes_as_a_new_attempt(ray_home):
    import ray

    heads = [RayHead(token=os.environ["RAY_AUTH_TOKEN"], num_cpus=4)]
    address = heads[0].address

    async def go():
        plan = parse_plan(f"name: resume-down\ntasks: [arith-small]\nagents: [test-crash-probe]\nmodels: [tiny]\n"
                          f"seeds: [0]\nbudget: 300s\nexecutor: ray\ngpus_per_run: 0\n"
                          f"cluster: {{address: '{address}'}}\n")
        async with retrying_engine(ray_home, TASKS) as engine:
            [run_id] = await engine.enqueue_plan(plan)
            await _until(lambda: sum(m.startswith("tick ") for m in _messages(engine.store, run_id, "stdout")) >= 3,
                         300, "the agent's ticks")
        ray.shutdown()                       # this process's driver: it must not outlive the head
        heads.pop().stop()
        async with retrying_engine(ray_home, TASKS) as engine:
            store = engine.store
            await _until(lambda: any(m.startswith("waiting for cluster: ") for m in _messages(store, run_id)), 120,
                         "the run to say it waits for the cluster")
            assert store.run(run_id)["state"] == "running"
            assert [a["state"] for a in store.query("SELECT state FROM attempts WHERE run_id=?", (run_id,))] == \
                ["running"]
            heads.append(RayHead(token=os.environ["RAY_AUTH_TOKEN"], num_cpus=4,
                                 ports=(int(address.rsplit(":", 1)[1]), free_port())))
            [row] = await asyncio.wait_for(engine.wait_runs([run_id]), 600)
            attempts = store.query("SELECT state, error FROM attempts WHERE run_id=? ORDER BY number", (run_id,))
            assert [a["state"] for a in attempts] == ["lost", "exited"], attempts
            assert "gone when the cluster came back" in attempts[0]["error"], attempts
            assert row["state"] == "done" and row["test_score"] is not None, dict(row)

    try:
        asyncio.run(go())
    finally:
        ray.shutdown()
        for head in heads:
            head.stop()


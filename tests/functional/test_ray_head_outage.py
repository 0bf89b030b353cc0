"""The engine outlives its Ray cluster's head (issue 34), on a real head (`ray start --head`):
while the engine runs a Ray run, the head is SIGKILLed (every process of it: the run's actor too)
and stays down past the minute after which Ray ends a driver whose GCS is gone. The engine's Ray
driver is a child process (executors/ray_driver.py), so only that child is lost: the engine (this
test's process) stays alive, a local run enqueued meanwhile finishes graded, and the Ray run says
`waiting for cluster` (event, `runs.waiting`, `runs list`) with its budget clock stopped. When a
head is started again on the same address, the run's attempt is closed `lost` (its actor did not
survive the head) and the run is retried as attempt 2 of the same run id, and ends `done`; the
budget clock restarted with the time waited recorded."""

import asyncio
import json
import os
import time

import pytest

from autorl_tui.catalog.plans import parse_plan
from tests.support.harness import TASKS, cli
from tests.support.ray_cluster import ray_home, retrying_engine  # noqa: F401 (fixture)
from tests.support.ray_head import RayHead, free_port

pytestmark = [pytest.mark.slow, pytest.mark.long]   # minutes: make test-long (CI time)

OUTAGE_S = 70.0       # past Ray's 60 s (gcs_rpc_server_reconnect_timeout_s), after which it ends a driver


async def _until(check, timeout_s: float, what: str) -> None:
    t0 = time.time()
    while not check():
        assert time.time() - t0 < timeout_s, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


def _events(store, run_id):
    return store.query("SELECT kind, message, data FROM events WHERE run_id=? ORDER BY id", (run_id,))


def _plan(name: str, executor: str, address: str | None = None):
    cluster = f"cluster: {{address: '{address}'}}\n" if address else ""
    return parse_plan(f"name: {name}\ntasks: [arith-small]\nagents: [test-crash-probe]\nmodels: [tiny]\n"
                      f"seeds: [0]\nbudget: 300s\nexecutor: {executor}\ngpus_per_run: 0\n{cluster}")


def test_a_head_outage_leaves_the_engine_and_its_local_runs_alone_and_the_ray_run_waits(ray_home):  # noqa: F811
    heads = [RayHead(token=os.environ["RAY_AUTH_TOKEN"], num_cpus=4)]
    address = heads[0].address

    async def go():
        async with retrying_engine(ray_home, TASKS) as engine:
            store = engine.store
            [ray_run] = await engine.enqueue_plan(_plan("outage-ray", "ray", address))
            await _until(lambda: sum(e["kind"] == "stdout" and e["message"].startswith("tick ")
                                     for e in _events(store, ray_run)) >= 3, 300, "the Ray agent's ticks")
            driver = engine.executor("ray").driver
            assert driver.running and driver.starts == 1
            heads.pop().stop()                      # SIGKILL: GCS, raylet, the run's actor
            down_at = time.time()
            [local_run] = await engine.enqueue_plan(_plan("outage-local", "local"))
            await _until(lambda: store.run(ray_run)["waiting"] == "cluster", 60, "the Ray run to wait")
            said_after = time.time() - down_at
            waited = [json.loads(e["data"]) for e in _events(store, ray_run)
                      if e["message"].startswith("waiting for cluster: ")]
            assert waited and waited[0]["budget_clock"] == "stopped", waited
            assert store.run(ray_run)["state"] == "running"
            listed = cli("runs", "list", home=ray_home, timeout=120)
            assert listed.returncode == 0 and "running (waiting for cluster)" in listed.stdout, listed.stdout
            # Past the minute after which Ray ends a driver that lost its GCS: this process lives on.
            await _until(lambda: time.time() - down_at >= OUTAGE_S, OUTAGE_S + 10, "the outage")
            assert store.run(ray_run)["waiting"] == "cluster"
            heads.append(RayHead(token=os.environ["RAY_AUTH_TOKEN"], num_cpus=4,
                                 ports=(int(address.rsplit(":", 1)[1]), free_port())))
            up_at = time.time()
            local_row, ray_row = await asyncio.wait_for(engine.wait_runs([local_run, ray_run]), 900)
            print(f"\nwaiting said {said_after:.1f} s after the kill; local run ended "
                  f"{local_row['ended_at'] - down_at:.0f} s after it; the Ray run done "
                  f"{ray_row['ended_at'] - up_at:.0f} s after the head came back")
            assert local_row["state"] == "done" and local_row["test_score"] is not None, dict(local_row)
            attempts = store.query("SELECT state, error FROM attempts WHERE run_id=? ORDER BY number", (ray_run,))
            assert [a["state"] for a in attempts] == ["lost", "exited"], attempts
            assert "gone when the cluster came back" in attempts[0]["error"], attempts
            assert ray_row["state"] == "done" and ray_row["test_score"] is not None, dict(ray_row)
            assert ray_row["waiting"] is None
            back = [json.loads(e["data"]) for e in _events(store, ray_run)
                    if (e["data"] or "").find('"budget_clock": "restarted"') >= 0]
            assert back and back[0]["waited_s"] >= OUTAGE_S - 10, back        # the clock stood still meanwhile
            assert driver.starts >= 2                       # a new driver process for the head that came back

    try:
        asyncio.run(go())
    finally:
        for head in heads:
            head.stop()

"""A submission whose grading node dies, on a real local Ray cluster (a head and two workers
declaring 2 fake GPUs each): the worker that runs the agent, and grades its first submission, is
killed (its raylet and workers SIGKILLed) while that grading is under way. The submission is
graded again on the other worker from its snapshot on the shared home: `scored`, never `error`,
so nothing extra counts against the cap; the run's attempt is `lost` and retried, and the run ends
`done`."""

import asyncio
import json
import time
from pathlib import Path

import pytest

from tests.support.ray_cluster import one_run_plan, ray_cluster, ray_home, retrying_engine  # noqa: F401
from tests.support.slow_task import slow_task

pytestmark = [pytest.mark.slow, pytest.mark.long]   # minutes: make test-long (CI time)


def _events(store, run_id):
    out = []
    for e in store.query("SELECT kind, message, data FROM events WHERE run_id=? ORDER BY id", (run_id,)):
        data = json.loads(e["data"]) if isinstance(e["data"], str) else (e["data"] or {})
        out.append((e["kind"], e["message"], data or {}))
    return out


def test_a_submission_whose_grading_node_dies_is_graded_on_another_node(ray_cluster, ray_home, tmp_path):
    cluster, workers, _ = ray_cluster
    tasks = slow_task(tmp_path, dev_n=600)

    async def go():
        async with retrying_engine(ray_home, tasks) as engine:
            [run_id] = await engine.enqueue_plan(one_run_plan("node-loss", "arith-slow", "test-crash-probe",
                                                              cluster.address, gpus=1))
            store = engine.store
            t0 = time.time()
            # Until the first submission's dev grading reports progress (on the agent's node).
            while not any(kind == "grading" and data.get("phase") == "grading" and data.get("split") == "dev"
                          and (data.get("progress") or {}).get("done", 0) > 0
                          for kind, _, data in _events(store, run_id)):
                assert time.time() - t0 < 600, "the first submission's grading never started"
                await asyncio.sleep(0.2)
            [attempt] = store.query("SELECT * FROM attempts WHERE run_id=? ORDER BY number", (run_id,))
            node_id = json.loads((Path(attempt["log_dir"]) / "ray.json").read_text())["node_id"]
            [node] = [w for w in workers if w.node_id == node_id]
            [first] = store.query("SELECT * FROM submissions WHERE run_id=?", (run_id,))
            assert first["status"] == "grading"
            await asyncio.to_thread(cluster.remove_node, node, False)        # SIGKILL: raylet, workers
            [row] = await asyncio.wait_for(engine.wait_runs([run_id]), 900)
            while store.submission(first["id"]).status == "grading":      # it may outlive the attempt
                assert time.time() - t0 < 900, "the re-grading never ended"
                await asyncio.sleep(0.2)
            first = store.submission(first["id"]).to_dict()
            assert first["status"] == "scored" and first["score"] is not None, first
            ends = [data for kind, _, data in _events(store, run_id)
                    if kind == "grading" and data.get("phase") == "end" and "lost_nodes" in (data.get("where") or {})]
            assert len(ends) == 1 and ends[0]["where"]["lost_nodes"] == [node_id], ends
            assert ends[0]["where"]["node_id"] != node_id and ends[0]["score"] == first["score"]
            # No grading was recorded as failed: nothing counts against the cap beyond what was graded.
            subs = store.query("SELECT status FROM submissions WHERE run_id=?", (run_id,))
            assert "error" not in {s["status"] for s in subs}, subs
            assert len(store.capped_submission_times(run_id)) == sum(s["status"] in ("scored",) for s in subs)
            attempts = store.query("SELECT state FROM attempts WHERE run_id=? ORDER BY number", (run_id,))
            assert attempts[0]["state"] == "lost" and row["state"] == "done", (attempts, dict(row))

    asyncio.run(go())

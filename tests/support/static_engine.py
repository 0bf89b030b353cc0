"""A store-only engine for console tests that need fixed data (snapshots): it exposes the Engine
API over a real Store filled through the real Store API, and runs nothing. Commands change the
run rows and publish the same events the real engine would, so the console cannot tell the
difference on the wire. Tests of live behaviour use the real Engine instead."""

from __future__ import annotations

import asyncio
import threading

from autorl_tui.engine.events import ClusterChanged, EventBus, QueueChanged, RunStateChanged
from autorl_tui.executors.ray_view import cluster_state
from autorl_tui.daemon.server import CatalogSources, EngineServer
from autorl_tui.exitcodes import UsageError
from autorl_tui.home import Home
from autorl_tui.store.db import Store, decode_row

T0 = 1_800_000_000.0   # fixed epoch for deterministic rows


class StaticEngine:
    def __init__(self, home: Home, cluster: dict | None = None):
        self.home = home
        self.store = Store(home.store_path)
        self.bus = EventBus()
        self.queue_paused = False
        self.enqueued: list = []
        self.cluster = cluster

    def cluster_state(self) -> dict | None:
        return self.cluster

    def set_cluster(self, cluster: dict | None) -> None:
        """What the real engine does when its view of the Ray cluster changes."""
        self.cluster = cluster
        self.bus.publish(ClusterChanged(None, cluster=cluster))

    def runs(self, states=None) -> list[dict]:
        rows = [decode_row("runs", r) for r in self.store.query("SELECT * FROM runs ORDER BY id DESC")]
        return [r for r in rows if states is None or r["state"] in states]

    def _set_state(self, run_id, state, reason=None, source=None):
        row = self.store.get("runs", run_id)
        if row is None:
            raise UsageError(f"no run {run_id!r}")
        self.store.update("runs", run_id, {"state": state, "end_reason": reason, "failure_source": source})
        self.bus.publish(RunStateChanged(run_id, state=state, previous=row["state"], reason=reason,
                                         failure_source=source))

    async def enqueue_plan(self, plan):
        self.enqueued.append(plan)
        return []

    async def cancel(self, run_id, reason="cancelled by user"):
        self._set_state(run_id, "cancelled", reason, "user")

    async def pause(self, run_id):
        self._set_state(run_id, "paused")

    async def resume(self, run_id):
        self._set_state(run_id, "running")

    async def extend_budget(self, run_id, seconds):
        row = self.store.get("runs", run_id)
        self.store.update("runs", run_id, {"budget_s": row["budget_s"] + seconds})

    async def retry(self, run_id):
        raise UsageError("the static engine runs nothing")

    async def move_to_front(self, run_id):
        pass

    async def set_priority(self, run_id, p):
        self.store.update("runs", run_id, {"priority": p})

    async def pause_queue(self):
        self.queue_paused = True
        self.bus.publish(QueueChanged(None, paused=True))

    async def resume_queue(self):
        self.queue_paused = False
        self.bus.publish(QueueChanged(None, paused=False))

    async def drain(self):
        pass


def fill_demo_store(store: Store) -> None:
    """Three runs with fixed timestamps: one running with log, metrics, submissions and
    revisions; one done; one queued."""
    spec = {"task": {"id": "arith"}, "agent": {"name": "scripted"}}
    base = dict(plan_id=None, plan_name="demo", level=1, model="tiny", budget_s=600.0, executor="local",
                gpus_requested=0, spec=spec)
    store.insert("runs", {**base, "id": "r0003-arith-scripted-s1", "task": "arith", "agent": "scripted",
                          "seed": 1, "state": "queued", "created_at": T0 + 20, "queue_pos": 1})
    store.insert("runs", {**base, "id": "r0002-arith-scripted-s0", "task": "arith", "agent": "scripted",
                          "seed": 0, "state": "running", "created_at": T0 + 10, "started_at": T0 + 12,
                          "deadline": T0 + 612, "baseline_score": 17.0, "baseline_dev_score": 18.0,
                          "best_dev_score": 66.5, "dev_improvement": 48.5, "current_attempt": 1, "workspace": "/tmp/ws"})
    store.insert("runs", {**base, "id": "r0001-arith-baseline-copy-s0", "task": "arith", "agent": "baseline-copy",
                          "seed": 0, "state": "done", "created_at": T0, "started_at": T0 + 1, "deadline": T0 + 601,
                          "ended_at": T0 + 95, "baseline_score": 17.0, "baseline_dev_score": 18.0,
                          "best_dev_score": 18.0, "dev_improvement": 0.0, "test_score": 17.5, "improvement": 0.5, "current_attempt": 1, "end_reason": "agent exited"})
    rid = "r0002-arith-scripted-s0"
    for i in range(60):
        kind = "stderr" if i % 17 == 5 else "stdout"
        store.append_event(rid, kind, f"step {i:03d}: training loss={1.0 / (i + 1):.4f}", ts=T0 + 12 + i,
                           level="warning" if kind == "stderr" else "info")
    store.append_event(rid, "harness", "submission 1 scored 66.5 (+48.5 over baseline)", ts=T0 + 80)
    for step in range(0, 40):
        store.append_metric(rid, "loss", 2.0 / (1 + step * 0.3), step=step, source="metrics_jsonl", ts=T0 + 20 + step)
        store.append_metric(rid, "reward", min(1.0, 0.1 + step * 0.025), step=step, source="metrics_jsonl",
                            ts=T0 + 20 + step)
        store.append_metric(rid, "kl", 0.01 * (step % 7), step=step, source="metrics_jsonl", ts=T0 + 20 + step)
    store.append_resource(rid, cpu_percent=93.0, rss_bytes=850 * 2**20, n_procs=3, ts=T0 + 90)
    a = store.put_blob(b"import trl\nlr = 1e-5\nsteps = 100\n")
    b = store.put_blob(b"import trl\nlr = 5e-5\nsteps = 300\nbeta = 0.04\n")
    store.insert("revisions", {"run_id": rid, "seq": 1, "ts": T0 + 30, "reason": "change",
                               "manifest": {"train.py": a}, "n_files": 1, "total_bytes": 31})
    store.insert("revisions", {"run_id": rid, "seq": 2, "ts": T0 + 70, "reason": "submission",
                               "manifest": {"train.py": b, "README.md": a}, "n_files": 2, "total_bytes": 80})
    store.insert("submissions", {"run_id": rid, "attempt": 1, "seq": 1, "path": "output/v1",
                                 "content_hash": "9f2c1e77ab04d5e6", "revision_id": 2, "received_at": T0 + 72,
                                 "graded_at": T0 + 80, "status": "scored", "score": 66.5, "improvement": 48.5})
    store.insert("submissions", {"run_id": rid, "attempt": 1, "seq": 2, "path": "output/v2",
                                 "content_hash": "9f2c1e77ab04d5e6", "revision_id": 2, "received_at": T0 + 85,
                                 "status": "duplicate", "duplicate_of": 1})
    store.insert("attempts", {"run_id": rid, "number": 1, "state": "running", "executor": "local",
                              "started_at": T0 + 12, "gpus": []})
    store.flush()


FIXED_CATALOG = {
    "tasks": [{"id": "arith", "name": "Arithmetic", "level": 1, "default_budget": "5m"},
              {"id": "gsm8k", "name": "GSM8K", "level": 1, "default_budget": "2h"}],
    "agents": [{"name": "baseline-copy", "description": "the control"}, {"name": "scripted", "description": ""}],
    "models": ["tiny"], "executors": ["local", "docker"], "gpus": [],
}


def ray_node(node_id: str, address: str, hostname: str, gpus: int, alive: bool = True) -> dict:
    """A row as `ray.nodes()` gives it."""
    return {"NodeID": node_id, "Alive": alive, "NodeManagerAddress": address, "NodeManagerHostname": hostname,
            "Resources": {"CPU": 8.0, "GPU": float(gpus), "memory": 2.0**34, f"node:{address}": 1.0}}


def demo_cluster(worker_b_alive: bool = True) -> dict:
    """A head and two 2-GPU workers; the running demo run's first attempt holds worker b's GPU 1,
    and once worker b is gone its second attempt holds worker a's GPU 0."""
    head, a, b = "a0" * 14, "b1" * 14, "c2" * 14
    nodes = [ray_node(head, "10.0.0.1", "head", 0), ray_node(a, "10.0.0.2", "gpu-a", 2),
             ray_node(b, "10.0.0.3", "gpu-b", 2, alive=worker_b_alive)]
    rid = "r0002-arith-scripted-s0"
    held = ([{"run_id": rid, "attempt": 1, "node_id": b, "gpu_ids": ["1"]}] if worker_b_alive else
            [{"run_id": rid, "attempt": 2, "node_id": a, "gpu_ids": ["0"]}])
    return cluster_state("10.0.0.1:6379", nodes, None, held)


class FixedCatalogServer(EngineServer):
    """The catalog is whatever task cards and agent specs are installed; snapshots pin it."""

    def cmd_catalog(self, conn) -> dict:
        return FIXED_CATALOG


class ServedEngine:
    """A StaticEngine behind the real EngineServer, on its own thread and event loop (the
    snapshot fixture runs the app with `App.run`, which owns the test thread's loop)."""

    def __init__(self, home: Home, cluster: dict | None = None):
        self.home = home
        self.cluster = cluster
        self.loop = asyncio.new_event_loop()
        self.engine: StaticEngine | None = None
        self.server: EngineServer | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True)

    def _main(self):
        asyncio.set_event_loop(self.loop)

        async def setup():
            self.engine = StaticEngine(self.home, self.cluster)
            fill_demo_store(self.engine.store)
            self.server = FixedCatalogServer(self.engine, self.home.socket_path,
                                       catalog=CatalogSources(home_root=self.home.root, concurrency=2))
            await self.server.start()

        self.loop.run_until_complete(setup())
        self._ready.set()
        self.loop.run_forever()

    def __enter__(self):
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc):
        async def teardown():
            await self.server.close()
            self.engine.store.close()

        asyncio.run_coroutine_threadsafe(teardown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)

"""The console's snapshot at 1,000 and 10,000 runs (issue 36, the console's side): what an attach
and a re-attach cost on the wire and in time, against the full rows with their specs that every
attach used to receive.

A real EngineServer over a real Store filled with N synthetic finished runs (each with a spec of
~1.6 KB, like a resolved task card); a real EngineClient over the Unix socket reads the snapshot
in pages as the console does, then two runs change (one fails, one is added) and it re-reads with
the digests it holds.

Prints `name: value unit` lines.   Usage: python benchmarks/bench_console_snapshot.py [--runs 1000 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
T0 = 1_800_000_000.0
SPEC = {"task": {"id": "arith", "card": "c" * 1100, "protocol": {"temperature": 0.0, "max_tokens": 256}},
        "agent": {"name": "scripted", "env": {"KEY": "v" * 300}}, "model": {"path": "/models/tiny"}}
PAGE = 500


class BenchEngine:
    """The engine's side of the snapshot: its store (the real one) and its queue state."""

    def __init__(self, store):
        from autorl_tui.engine.events import EventBus

        self.store = store
        self.bus = EventBus()           # a console subscribes: nothing is published here
        self.queue_paused = False

    def runs(self, states=None):
        return self.store.runs(states)


def fill(store, n: int) -> None:
    base = dict(plan_id=None, plan_name="big", level=1, model="tiny", budget_s=600.0, executor="local",
                gpus_requested=0, spec=SPEC, task="arith", agent="scripted", state="done", current_attempt=1)
    store.insert_many("runs", [{**base, "id": f"r{i:05d}-arith-scripted-s{i % 3}", "seed": i % 3,
                                "created_at": T0 + i, "started_at": T0 + i, "ended_at": T0 + i + 50,
                                "best_dev_score": float(i % 100), "baseline_dev_score": 10.0,
                                "test_score": 40.0, "baseline_score": 12.0, "improvement": 28.0}
                               for i in range(n)])
    store.insert_many("submissions", [{"run_id": f"r{i:05d}-arith-scripted-s{i % 3}", "seq": k, "path": "m",
                                       "received_at": T0 + i + k, "status": "scored", "score": 10.0 + k * i % 50}
                                      for i in range(n) for k in range(1, 5)])


def count_bytes(client) -> dict:
    """Bytes of every request and answer on this client from now on, as compact JSON (what the
    engine writes; the client's own requests are written the same way)."""
    sizes = {"sent": 0, "received": 0}
    call = client._call

    async def counted(cmd, args):
        sizes["sent"] += len(json.dumps({"cmd": cmd, "args": args}, separators=(",", ":")))
        msg = await call(cmd, args)
        sizes["received"] += len(json.dumps(msg, separators=(",", ":")))
        return msg
    client._call = counted
    return sizes


async def measure(n: int) -> dict:
    from autorl_tui.daemon.client import EngineClient
    from autorl_tui.daemon.server import CatalogSources, EngineServer
    from autorl_tui.home import Home
    from autorl_tui.store.db import Store

    out = {}
    with tempfile.TemporaryDirectory(prefix="autorl-bench-snap-") as tmp:
        home = Home.open(os.path.join(tmp, "h"))
        store = Store(home.store_path)
        fill(store, n)
        engine = BenchEngine(store)
        server = EngineServer(engine, home.socket_path, catalog=CatalogSources(home_root=home.root))
        await server.start()
        try:
            async with await EngineClient.connect(home) as client:
                t = time.perf_counter()
                full = engine.runs()                      # what the old snapshot sent: every row with its spec
                out["old_full_rows_s"] = time.perf_counter() - t
                out["old_full_rows_bytes"] = len(json.dumps(full, default=str, separators=(",", ":")))
                sizes = count_bytes(client)
                t = time.perf_counter()
                pages = [p async for p in client.snapshot_pages(PAGE)]
                out["attach_s"] = time.perf_counter() - t
                out["attach_bytes"] = sizes["received"]
                out["attach_pages"] = len(pages)
                t = time.perf_counter()
                first = await client.snapshot(page_size=PAGE)
                out["first_page_s"] = time.perf_counter() - t
                assert len(first["runs"]) == min(n, PAGE)
                known = {r["id"]: (r["created_at"], r["digest"]) for p in pages for r in p["runs"]}
                store.update("runs", "r00042-arith-scripted-s0", {"state": "failed", "end_reason": "boom"})
                store.insert("runs", {**store.run("r00001-arith-scripted-s1"), "id": f"r{n:05d}-new-s0",
                                      "created_at": T0 + 10 * n})
                sizes["sent"] = sizes["received"] = 0
                t = time.perf_counter()
                pages = [p async for p in client.snapshot_pages(PAGE, known=known)]
                out["resync_s"] = time.perf_counter() - t
                out["resync_bytes"], out["resync_request_bytes"] = sizes["received"], sizes["sent"]
                out["resync_runs_sent"] = sum(len(p["runs"]) for p in pages)
        finally:
            await server.close()
            store.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, nargs="+", default=[1000, 10000])
    args = parser.parse_args()
    print(f"machine_load_average_1m: {os.getloadavg()[0]:.2f} (on {os.cpu_count()} cores)")
    for n in args.runs:
        r = asyncio.run(measure(n))
        print(f"snapshot_{n}_old_full_rows: {r['old_full_rows_bytes'] / 1e6:.2f} MB (every run with its spec, "
              f"what each attach sent before; {r['old_full_rows_s']:.2f} s to read them)")
        print(f"snapshot_{n}_attach: {r['attach_bytes'] / 1e6:.2f} MB in {r['attach_pages']} pages, "
              f"{r['attach_s']:.2f} s (first page alone {r['first_page_s'] * 1000:.0f} ms)")
        print(f"snapshot_{n}_resync_after_2_changes: {r['resync_bytes'] / 1e3:.1f} kB back, "
              f"{r['resync_request_bytes'] / 1e3:.1f} kB of digests sent, {r['resync_runs_sent']} runs, "
              f"{r['resync_s']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

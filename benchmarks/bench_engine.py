"""Engine figures: store ingestion rate (batched commits), engine start-up time, and the metrics
tailer keeping up with a fast writer (10,000 lines/s for 10 s) without loss or duplication,
including a truncated last line."""

import asyncio
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autorl_tui.instrument.metrics import MetricsCollector  # noqa: E402
from autorl_tui.store import Store  # noqa: E402


def bench_ingestion(tmp: Path) -> None:
    store = Store(tmp / "ingest.db", flush_rows=5000)
    n = 200_000
    t0 = time.perf_counter()
    for i in range(n):
        store.append_event("r1", "stdout", f"step {i}: loss=0.123 reward=0.456 some more text of a log line")
        if i % 2000 == 1999:
            store.flush()
    store.flush()
    dt = time.perf_counter() - t0
    print(f"store ingestion (events, batched commits): {n / dt:,.0f} events/s")
    t0 = time.perf_counter()
    for i in range(50_000):
        store.append_metric("r1", "loss", 0.5, step=i, source="metrics_jsonl")
    store.flush()
    print(f"store ingestion (metric points): {50_000 / (time.perf_counter() - t0):,.0f} points/s")
    t0 = time.perf_counter()
    for i in range(500):
        store.update("runs", "nope", {"state": "running"})   # an immediate, committed state change
    print(f"immediate committed updates: {500 / (time.perf_counter() - t0):,.0f} /s")
    store.close()


def bench_startup(tmp: Path) -> None:
    from autorl_tui.engine.engine import Engine
    from autorl_tui.home import Home

    home = Home.open(str(tmp / "home"))
    store = Store(home.store_path)
    for i in range(2000):   # a home with history
        store.insert("runs", {"id": f"r{i:05d}", "task": "arith", "agent": "a", "model": "tiny", "budget_s": 60,
                              "state": "done", "created_at": time.time(), "spec": {}})
    store.close()

    async def once() -> float:
        t0 = time.perf_counter()
        engine = Engine(home)
        await engine.start()
        dt = time.perf_counter() - t0
        await engine.stop()
        return dt

    times = [asyncio.run(once()) for _ in range(5)]
    print(f"engine start-up (home with 2,000 runs): median {sorted(times)[2] * 1000:.1f} ms")
    t0 = time.perf_counter()
    import subprocess
    subprocess.run([sys.executable, "-m", "autorl_tui", "--home", str(home.root), "runs", "list", "--json"],
                   capture_output=True, check=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    print(f"cold CLI start (`runs list --json`, new process): {(time.perf_counter() - t0) * 1000:.0f} ms")


def bench_tailer(tmp: Path, rate: int = 10_000, seconds: float = 10.0) -> None:
    ws = tmp / "ws"
    (ws / "logs").mkdir(parents=True)
    path = ws / "logs" / "metrics.jsonl"
    collector = MetricsCollector(ws)
    collector.SCAN_EVERY_S = 1e9   # only the JSONL channel is measured here
    total = int(rate * seconds)
    done = threading.Event()

    def writer():
        with open(path, "a", buffering=1 << 16) as fh:
            t0 = time.perf_counter()
            for i in range(total):
                line = json.dumps({"ts": time.time(), "step": i, "metrics": {"loss": 1.0 / (i + 1)}}) + "\n"
                if i % 997 == 0:   # split a line across two writes: the reader sees a truncated last line
                    fh.write(line[:10])
                    fh.flush()
                    fh.write(line[10:])
                else:
                    fh.write(line)
                if i % 500 == 499:
                    fh.flush()
                    ahead = (i + 1) / rate - (time.perf_counter() - t0)
                    if ahead > 0:
                        time.sleep(ahead)
            fh.write('{"step": -1, "metrics": {"loss": ')   # a truncated last line that never completes
        done.set()

    seen: list[int] = []
    max_lag = 0
    thread = threading.Thread(target=writer)
    t0 = time.perf_counter()
    thread.start()
    while not done.is_set():
        time.sleep(0.25)
        pts, _ = collector.poll()
        seen.extend(p.step for p in pts)
        written_approx = min(total, int((time.perf_counter() - t0) * rate))
        max_lag = max(max_lag, written_approx - len(seen))
    pts, notes = collector.poll(final=True)
    seen.extend(p.step for p in pts)
    dt = time.perf_counter() - t0
    ok = seen == list(range(total))
    print(f"metrics tailer: {total:,} lines written at {rate:,}/s over {dt:.1f}s; read {len(seen):,}; "
          f"lost {total - len(set(seen)):,}, duplicated {len(seen) - len(set(seen)):,}, in order: {ok}")
    print(f"metrics tailer max lag behind the writer: {max_lag:,} lines (~{max_lag / rate:.2f}s); "
          f"truncated last line reported, not ingested: {bool(notes)}")
    if not ok:
        raise SystemExit("metrics tailer lost or duplicated lines")


if __name__ == "__main__":
    tmp = Path(tempfile.mkdtemp(prefix="autorl-bench-"))
    try:
        bench_ingestion(tmp)
        bench_startup(tmp)
        bench_tailer(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

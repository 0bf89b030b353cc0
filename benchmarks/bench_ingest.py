"""Ingestion (issue 36): a flood of agent stdout through the engine's own path into the store,
against the floor, a raw `executemany` of the same rows, side by side in one run.

The engine's path is AgentWatch's, piece by piece: the bounded batch read off the loop
(`asyncio.to_thread(AgentWatch._read_logs)`: FileTail, LogIngest, the metrics collector's stdout
feed), `_pump_batch` (the rows and their events on the bus, a console-like subscriber draining it),
the offsets staged with them, the store's commits; in a fresh store each time. The floor: the same
rows, built beforehand, inserted by one `executemany` in one transaction into a fresh store.
BENCH_INGEST_LINES (200,000) lines of about 90 characters; median of 3, alternating. Beside the
wall-clock ratio, the same ratio of the process's CPU seconds (both threads of the engine's path):
on a machine loaded by others, where the wall clock is mostly waiting for the CPU and the disk,
that one is the comparable figure."""
import asyncio
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autorl_tui.engine.agent_watch import AgentWatch  # noqa: E402
from autorl_tui.engine.events import EventBus  # noqa: E402
from autorl_tui.instrument.filetail import FileTail  # noqa: E402
from autorl_tui.instrument.log_ingest import LogIngest  # noqa: E402
from autorl_tui.engine.run_journal import RunJournal  # noqa: E402
from autorl_tui.store.db import Store  # noqa: E402
from autorl_tui.store.records import RunRecord  # noqa: E402

LINES = int(os.environ.get("BENCH_INGEST_LINES") or 200_000)
RUN = "r0001-arith-flood-s0"


def _lines() -> list[str]:
    rng = random.Random(0)
    words = ["loss", "step", "reward", "epoch", "tokens", "grad_norm", "lr", "the", "agent", "runs", "training"]
    return [f"[{i:07d}] " + " ".join(rng.choice(words) for _ in range(12)) + f" {rng.random():.6f}"
            for i in range(LINES)]


def floor(base: Path, lines: list[str]) -> tuple[float, float]:
    store = Store(base / "floor.db")
    now = time.time()
    rows = [(RUN, 1, now, "stdout", "info", line, None) for line in lines]
    conn = store._conn
    t0, c0 = time.perf_counter(), time.process_time()
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO events (run_id, attempt, ts, kind, level, message, data) VALUES (?, ?, ?, ?, ?, ?, ?)",
                     rows)
    conn.execute("COMMIT")
    took, cpu = time.perf_counter() - t0, time.process_time() - c0
    store.close()
    return took, cpu


async def _engine_path(base: Path, attempt: Path) -> tuple[float, float, int]:
    store = Store(base / "engine.db")
    bus = EventBus()
    sub = bus.subscribe()
    seen = 0

    async def console() -> None:      # a console attached: takes what the bus offers, as it comes
        nonlocal seen
        while True:
            await sub.get()
            seen += 1 + len(sub.drain())

    drain = asyncio.create_task(console())
    journal = RunJournal(store, bus, RunRecord(id=RUN, task="arith", agent="bench", model="tiny", state="running",
                                               current_attempt=1, budget_s=600.0, created_at=time.time()))
    handle = SimpleNamespace(stdout_path=attempt / "stdout.log", stderr_path=attempt / "stderr.log")
    workspace = SimpleNamespace(root=attempt, metrics_file=attempt / "logs" / "metrics.jsonl")
    watch = AgentWatch(journal, SimpleNamespace(), handle, workspace=workspace, agent=SimpleNamespace(), spec={},
                       gpus=[], cancel_reason=lambda: None)
    metrics = watch._metrics_collector(None)
    out_tail, err_tail = FileTail(handle.stdout_path), FileTail(handle.stderr_path)
    ingest = LogIngest(out_tail, err_tail, None, stored_events=0, stored_bytes=0, max_events=10 * LINES,
                       max_bytes=1 << 40)
    t0, c0 = time.perf_counter(), time.process_time()
    while True:
        batch = await asyncio.to_thread(AgentWatch._read_logs, ingest, metrics, True)
        watch._pump_batch(batch, ingest)
        store.stage_attempt_offsets(RUN, 1, {"stdout": out_tail.offset, "stderr": err_tail.offset})
        if batch.exhausted:
            break
        await asyncio.sleep(0)
    store.flush()
    took, cpu = time.perf_counter() - t0, time.process_time() - c0
    for _ in range(1000):           # the console takes what the last batch published
        if seen >= LINES:
            break
        await asyncio.sleep(0)
    drain.cancel()
    stored = store.one("SELECT COUNT(*) AS n FROM events")["n"]
    store.close()
    if seen != LINES:
        raise SystemExit(f"the console attached to the engine's path got {seen} events, not {LINES}")
    return took, cpu, stored


def engine_path(base: Path) -> tuple[float, float]:
    took, cpu, stored = asyncio.run(_engine_path(base, base / "attempt"))
    if stored != LINES:
        raise SystemExit(f"the engine's path stored {stored} rows, not {LINES}")
    return took, cpu


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    try:
        lines = _lines()
        (base / "attempt" / "logs").mkdir(parents=True)
        (base / "attempt" / "stdout.log").write_text("\n".join(lines) + "\n")
        (base / "attempt" / "stderr.log").write_text("")
        floors: list[tuple[float, float]] = []
        engines: list[tuple[float, float]] = []
        loads = []
        for i in range(3):
            loads.append(os.getloadavg()[0])
            for side in ("floor", "engine") if i % 2 == 0 else ("engine", "floor"):
                for db in base.glob("*.db*"):
                    db.unlink()
                if side == "floor":
                    floors.append(floor(base, lines))
                else:
                    engines.append(engine_path(base))
        ratios = [e[0] / f[0] for e, f in zip(engines, floors)]
        cpu_ratios = [e[1] / f[1] for e, f in zip(engines, floors)]
        wall, cpu = statistics.median(e[0] for e in engines), statistics.median(e[1] for e in engines)
        load = " ".join(f"{x:.1f}" for x in loads)
        print(f"ingest_over_executemany: {statistics.median(ratios):.2f} (target <= 1.5; {LINES} stdout lines: "
              f"engine path {wall:.2f} s, {LINES / wall:,.0f} lines/s; raw executemany "
              f"{statistics.median(f[0] for f in floors):.2f} s; pairs {' '.join(f'{r:.2f}' for r in ratios)}) "
              f"| load {load}", flush=True)
        print(f"ingest_cpu_over_executemany: {statistics.median(cpu_ratios):.2f} (target <= 1.5; CPU seconds: "
              f"engine path {cpu:.2f} s, raw executemany {statistics.median(f[1] for f in floors):.2f} s; pairs "
              f"{' '.join(f'{r:.2f}' for r in cpu_ratios)}) | load {load}", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Live capture of the training metrics transformers/TRL print on stdout.

1. Lag: a child process prints TRL-format log dicts (`{'loss': '2.345', ..., 'epoch': '0.1'}`,
   10 a second, unbuffered, into a file like the executors' stdout.log) and notes when it printed
   each. The capture side runs the engine's own pieces at the engine's cadence: FileTail every
   AgentWatch.TAIL_INTERVAL_S, MetricsCollector.poll in a worker thread, Store.append_metric,
   and Store.flush every Engine.FLUSH_INTERVAL_S (the engine's flush loop). A point's lag is the
   time its row was committed minus the time it was printed. (It leaves out the executor and the
   engine's other work; tests/functional/test_metrics_capture.py checks the whole engine: < 5 s.)
2. Parser throughput: stdout lines (1 log dict in 5, the rest tqdm bars, JSON events and text)
   through feed_stdout + poll: lines/s and metric points/s.
"""

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autorl_tui.engine.engine import Engine  # noqa: E402
from autorl_tui.instrument.filetail import FileTail  # noqa: E402
from autorl_tui.instrument.metrics import MetricsCollector  # noqa: E402
from autorl_tui.instrument.sessions import SessionTracker  # noqa: E402
from autorl_tui.engine.agent_watch import AgentWatch  # noqa: E402
from autorl_tui.store import Store  # noqa: E402

WRITER = r"""
import json, sys, time
out, stamps, n, rate = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
with open(out, "a", buffering=1) as fh, open(stamps, "w") as st:
    for i in range(n):
        line = "{'loss': '%.4g', 'grad_norm': '%.4g', 'learning_rate': '%.4g', 'entropy': '%.4g', 'epoch': '%.4g'}" % (
            2.0 / (i + 1), 1.0 + i % 7, 1e-5, 0.9, (i + 1) / n)
        t = time.time()
        fh.write(line + "\n")
        st.write(json.dumps({"i": i, "t": t}) + "\n")
        time.sleep(1.0 / rate)
"""


def line_of(i: int) -> str:
    return (f"{{'loss': '{2.0 / (i + 1):.4g}', 'grad_norm': '{1.0 + i % 7:.4g}', 'learning_rate': '1e-05', "
            f"'entropy': '0.9', 'mean_token_accuracy': '0.5', 'num_tokens': '{188 * (i + 1)}', 'epoch': '{i / 1e6:.4g}'}}")


async def measure_lag(tmp: Path, n: int = 200, rate: float = 10.0) -> list[float]:
    ws = tmp / "ws"
    (ws / "logs").mkdir(parents=True)
    out, stamps = tmp / "stdout.log", tmp / "stamps.jsonl"
    out.touch()
    store = Store(tmp / "lag.db")
    tracker = SessionTracker(lambda row: store.append_session("r1", attempt=1, **row),
                             lambda sid, fields: store.stage_update("training_sessions", {"id": sid}, fields))
    collector = MetricsCollector(ws, None, tracker)
    tail = FileTail(out)
    committed: dict[int, float] = {}          # row id -> commit time
    loss_rows: list[int] = []
    stop = asyncio.Event()

    async def flush_loop():
        while not stop.is_set():
            await asyncio.sleep(Engine.FLUSH_INTERVAL_S)
            pending = [rid for rid in loss_rows if rid not in committed]
            store.flush()
            now = time.time()
            for rid in pending:
                committed[rid] = now

    flusher = asyncio.create_task(flush_loop())
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", WRITER, str(out), str(stamps), str(n), str(rate))
    wait = asyncio.create_task(proc.wait())
    while True:
        final = wait.done()
        lines = tail.read_lines(final=final)
        collector.feed_stdout(lines)
        points, _ = await asyncio.to_thread(collector.poll, final)
        for p in points:
            rid = store.append_metric("r1", p.name, p.value, step=p.step, source=p.source, ts=p.ts, session_id=p.session)
            tracker.stored(p.key, rid)
            if p.name == "loss":
                loss_rows.append(rid)
        if final:
            break
        await asyncio.wait({wait}, timeout=AgentWatch.TAIL_INTERVAL_S)
    await asyncio.sleep(Engine.FLUSH_INTERVAL_S * 2)
    stop.set()
    await flusher
    printed = [json.loads(l)["t"] for l in stamps.read_text().splitlines()]
    assert len(loss_rows) == len(printed) == n, (len(loss_rows), len(printed))
    store.close()
    return [committed[rid] - t for rid, t in zip(loss_rows, printed)]


def measure_parser(n_lines: int = 200_000) -> tuple[float, float, int]:
    noise = [" 45%|████▌     | 9/20 [00:03<00:03,  3.10it/s]",
             '{"type": "assistant", "message": {"content": [{"type": "text", "text": "{\'loss\': 1}"}]}}',
             "Map: 100%|██████████| 400/400 [00:00<00:00, 9000.00 examples/s]",
             "step 3: loss=0.123 reward=0.456 and a dict {'a': 1, 'epoch': 2}"]
    lines = [line_of(i) if i % 5 == 0 else noise[i % 4] for i in range(n_lines)]
    with tempfile.TemporaryDirectory() as d:
        collector = MetricsCollector(Path(d))
        collector.SCAN_EVERY_S = 1e9          # only the stdout channel is measured here
        t0 = time.perf_counter()
        n_points = 0
        for i in range(0, n_lines, 2000):    # the engine feeds a tick's worth of lines at a time
            collector.feed_stdout(lines[i:i + 2000], ts=time.time())
            pts, _ = collector.poll()
            n_points += len(pts)
        dt = time.perf_counter() - t0
    return n_lines / dt, n_points / dt, n_points


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as d:
        lags = asyncio.run(measure_lag(Path(d)))
    lags.sort()
    p50 = statistics.median(lags)
    p95 = lags[min(len(lags) - 1, int(round(0.95 * (len(lags) - 1))))]
    print(f"stdout metrics live-capture lag (printed -> committed to the store, {len(lags)} loss points at 10/s): "
          f"p50 {p50:.3f} s, p95 {p95:.3f} s, max {lags[-1]:.3f} s")
    lines_s, points_s, n_points = measure_parser()
    print(f"stdout log-dict parser: {lines_s:,.0f} lines/s (1 in 5 a log dict), {points_s:,.0f} points/s "
          f"({n_points:,} points stored once each)")


if __name__ == "__main__":
    main()

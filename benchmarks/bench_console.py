"""Console responsiveness under a log flood, and its memory after 1,000,000 log lines.

An engine process (here: a real EngineServer over a real Store, publishing RunEventAppended events
for one running run at a fixed rate, exactly as the engine does for an agent's stdout) floods the
console; the console is the real app, headless, attached over the Unix socket, with the flooded
run's screen open.

- input latency: time from a key press ("f", toggle following, which updates the log status
  line) to the first screen update that shows it, while 5,000 lines/s arrive;
- memory: the console process's RSS after 1,000,000 lines went through it (ring buffer: bounded).

Prints `name: value unit` lines.   Usage: python benchmarks/bench_console.py [--lines N] [--rate R]
BENCH_TREE=DIR measures the console (and engine) of another checkout with this script's
measurement (benchmarks/ab_console.py: A/B against an older revision); BENCH_LATENCIES=FILE
writes the raw latencies (seconds, one a line).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(os.environ.get("BENCH_TREE") or Path(__file__).resolve().parents[1])
sys.path.insert(0, str(REPO))
RUN_ID = "r0001-flood-bench-s0"


# ---------------------------------------------------------------------------- engine side
async def flood_engine(home_dir: str, rate: float, total: int, fast_rate: float, slow_lines: int) -> None:
    from autorl_tui.engine.events import EventBus, RunEventAppended
    from autorl_tui.daemon.server import CatalogSources, EngineServer
    from autorl_tui.home import Home
    from autorl_tui.store.db import Store, decode_row

    class FloodEngine:
        def __init__(self, home):
            self.store = Store(home.store_path)
            self.bus = EventBus()
            self.queue_paused = False

        def runs(self, states=None):
            return [decode_row("runs", r) for r in self.store.query("SELECT * FROM runs ORDER BY id DESC")]

    home = Home.open(home_dir)
    engine = FloodEngine(home)
    now = time.time()
    engine.store.insert("runs", {"id": RUN_ID, "task": "flood", "agent": "bench", "model": "tiny", "seed": 0,
                                 "budget_s": 3600, "state": "running", "created_at": now, "started_at": now,
                                 "deadline": now + 3600, "spec": {}})
    stop = asyncio.Event()
    server = EngineServer(engine, home.socket_path, catalog=CatalogSources(home_root=home.root),
                          on_shutdown=lambda _c: stop.set())
    await server.start()
    print("ready", flush=True)
    # Wait for the console to subscribe, then publish at `rate` lines/s in 10 ms ticks.
    while not any(c.subscription is not None for c in server._connections):
        await asyncio.sleep(0.05)
    sent, t0 = 0, time.monotonic()
    while sent < total and not stop.is_set():
        elapsed = time.monotonic() - t0
        slow_s = slow_lines / rate
        due = int(elapsed * rate) + 1 if elapsed < slow_s else slow_lines + int((elapsed - slow_s) * fast_rate) + 1
        due = min(total, due)
        while sent < due:
            engine.bus.publish(RunEventAppended(RUN_ID, kind="stdout",
                                                message=f"step {sent}: loss=0.{sent % 9973:04d} reward=0.5 kl=0.01 "
                                                        f"grad_norm=1.25 lr=5e-05 tokens/s=1234"))
            sent += 1
        await asyncio.sleep(0.01)
    print(f"sent {sent}", flush=True)
    await stop.wait()
    await server.close()


def start_engine(home_dir: str, rate: float, total: int, fast_rate: float, slow_lines: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, __file__, "--engine", home_dir, "--rate", str(rate),
                             "--lines", str(total), "--fast-rate", str(fast_rate), "--slow-lines", str(slow_lines)],
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout.readline().strip() == "ready"
    return proc


# ---------------------------------------------------------------------------- console side
def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


async def console_session(home_dir: str, presses: int, total: int, rate: float) -> dict:
    from autorl_tui.home import Home
    from autorl_tui.tui.app import ConsoleApp
    from autorl_tui.tui.screens.run import RunScreen
    from autorl_tui.tui.widgets.log_view import LogView

    app = ConsoleApp(Home.open(home_dir), notify_events=False)
    displays: list[float] = []
    original = app._display

    def display(screen, renderable):
        displays.append(time.perf_counter())
        return original(screen, renderable)

    app._display = display
    out: dict = {}
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(200):
            if app.model.runs:
                break
            await asyncio.sleep(0.05)
        rss_start = rss_bytes()
        app.open_run(RUN_ID)
        await asyncio.sleep(1.0)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        view = screen.query_one(LogView)
        latencies = []
        handled: list[float] = []
        toggle = screen.action_toggle_follow

        def timed_toggle():
            toggle()
            handled.append(time.perf_counter())

        screen.action_toggle_follow = timed_toggle
        from textual import events

        for i in range(presses):
            await asyncio.sleep(0.25)
            n_handled = len(handled)
            t0 = time.perf_counter()
            key = events.Key("f", "f")
            key.set_sender(app)
            app._driver.send_message(key)     # what the terminal driver does on a key press
            while len(handled) == n_handled:
                await asyncio.sleep(0.0005)
            t_handled = handled[-1]
            while not displays or displays[-1] < t_handled:
                await asyncio.sleep(0.0005)
            latencies.append(next(d for d in displays if d >= t_handled) - t0)
        out["latencies"] = latencies
        out["lines_at_latency_end"] = view.total
        # now let the rest of the lines through and measure memory
        deadline = time.monotonic() + total / rate * 3 + 60
        while app.client.received + app.dropped_events < total and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        await asyncio.sleep(0.5)
        out["lines_seen"] = app.client.received
        out["dropped"] = app.dropped_events
        out["ring"] = len(view.lines)
        out["rss_start"] = rss_start
        out["rss_end"] = rss_bytes()
        out["batches"] = app.applied_batches
    from autorl_tui.daemon.client import EngineClient

    async with await EngineClient.connect(Home.open(home_dir)) as client:
        await client.shutdown()
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", help=argparse.SUPPRESS)
    parser.add_argument("--rate", type=float, default=5000.0)
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--presses", type=int, default=20)
    parser.add_argument("--fast-rate", type=float, default=20000.0,
                        help="lines/s after the latency phase (1M lines at 5,000/s would take 200 s)")
    parser.add_argument("--slow-lines", type=int, default=50_000, help="lines sent at --rate first")
    args = parser.parse_args()
    if args.engine:
        asyncio.run(flood_engine(args.engine, args.rate, args.lines, args.fast_rate, args.slow_lines))
        return 0
    with tempfile.TemporaryDirectory(prefix="autorl-bench-") as tmp:
        # Phase 1: latency at 5,000 lines/s. Phase 2: the same console then receives the rest of the
        # 1,000,000 lines as fast as the engine publishes them (rate raised to keep the bench short).
        home = os.path.join(tmp, "h")
        engine = start_engine(home, args.rate, args.lines, args.fast_rate, args.slow_lines)
        try:
            res = asyncio.run(console_session(home, args.presses, args.lines, args.fast_rate))
        finally:
            try:
                engine.wait(10)
            except subprocess.TimeoutExpired:
                engine.kill()
    lat = sorted(res["latencies"])
    if os.environ.get("BENCH_LATENCIES"):
        Path(os.environ["BENCH_LATENCIES"]).write_text("".join(f"{x:.6f}\n" for x in res["latencies"]))
    p95 = lat[min(len(lat) - 1, int(len(lat) * 0.95))]
    print(f"machine_load_average_1m: {os.getloadavg()[0]:.2f} (on {os.cpu_count()} cores; latency is noisy when loaded)")
    print(f"console_flood_rate: {args.rate:.0f} lines/s")
    print(f"console_key_latency_median: {statistics.median(lat) * 1000:.1f} ms")
    print(f"console_key_latency_p95: {p95 * 1000:.1f} ms")
    print(f"console_key_latency_max: {lat[-1] * 1000:.1f} ms")
    print(f"console_lines_received: {res['lines_seen']} lines")
    print(f"console_lines_published: {args.lines} lines")
    print(f"console_lines_skipped: {res['dropped']} lines (engine-side lag plus console backlog dropped; "
          f"the state was re-read from the store each time)")
    print(f"console_log_ring_size: {res['ring']} lines")
    print(f"console_rss_attached: {res['rss_start'] / 2**20:.1f} MiB")
    print(f"console_rss_after_lines: {res['rss_end'] / 2**20:.1f} MiB")
    print(f"console_rss_growth: {(res['rss_end'] - res['rss_start']) / 2**20:.1f} MiB")
    print(f"console_update_batches: {res['batches']} batches")
    return 0


if __name__ == "__main__":
    sys.exit(main())

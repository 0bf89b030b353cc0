"""A 6 M-line stdout flood through the real engine (local executor) with the default log cap.

Prints the grading API's latency (GET /time, sequential, for the whole time the run is running),
the log events stored, the store's size and the engine's peak RSS. FLOOD_LINES changes the count;
BENCH_EXECUTOR=docker floods through a container instead (Docker's log API is much slower)."""

import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autorl_tui.tasks.arith.tiny_model import build_tiny_model, source_key  # noqa: E402
from tests.support.harness import install_model, make_reachable_home  # noqa: E402
from tests.support.log_flood import run_flood  # noqa: E402


def main():
    lines = int(os.environ.get("FLOOD_LINES") or 6_000_000)
    executor = os.environ.get("BENCH_EXECUTOR", "local")
    cache = Path(os.environ.get("AUTORL_TEST_CACHE", REPO / ".pytest_cache" / "autorl-models"))
    model = build_tiny_model(cache / f"tiny-{source_key()}", seed=0)   # shared with the tests' cache
    home = make_reachable_home("autorl-bench-")
    home.mkdir(parents=True)
    install_model(model, home)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            r = run_flood(home, Path(tmp), lines, None, executor)
        lat = sorted(r["latencies"])
        log_events = sum(r["counts"].get(k, 0) for k in ("stdout", "stderr", "action"))
        print(f"flood_lines: {lines}")
        print(f"run_state: {r['run']['state']}")
        print(f"api_requests: {len(lat)}")
        print(f"api_latency_p50: {statistics.median(lat) * 1000:.1f} ms")
        print(f"api_latency_p95: {statistics.quantiles(lat, n=20)[-1] * 1000:.1f} ms")
        print(f"api_latency_max: {lat[-1] * 1000:.1f} ms")
        print(f"log_events_stored: {log_events}")
        print(f"store_size: {r['store_bytes'] / 1024**2:.1f} MiB")
        print(f"engine_peak_rss: {r['max_rss'] / 1024**2:.0f} MiB")
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)


if __name__ == "__main__":
    main()

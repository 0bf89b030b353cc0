"""A/B of the console's key -> screen latency under a flood (benchmarks/bench_console.py): this
checkout against another revision, runs alternating in one session, so that a machine loaded by
other work weighs on both alike. Each side's latencies are pooled over its runs.

Usage: python benchmarks/ab_console.py [--base REV] [--rounds N] [-- bench_console.py options]
Default: --base HEAD (the last commit, against the working tree), 3 rounds, and a flood that lasts
as long as the presses: --lines 150000 --slow-lines 150000 --presses 40.
Not run by run_all.py (it is not a bench_*.py): it compares two trees, it measures neither alone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def extract(rev: str, dest: Path) -> None:
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", rev], capture_output=True, check=True)
    with tempfile.TemporaryFile() as tmp:
        tmp.write(archive.stdout)
        tmp.seek(0)
        with tarfile.open(fileobj=tmp) as tar:
            tar.extractall(dest, filter="data")


def one_run(tree: Path, bench_args: list[str], out: Path) -> list[float]:
    env = {**os.environ, "BENCH_TREE": str(tree), "BENCH_LATENCIES": str(out), "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, str(HERE / "bench_console.py"), *bench_args], env=env, cwd=tree,
                          capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"bench_console.py failed in {tree}: {proc.stderr[-2000:]}")
    return [float(x) for x in out.read_text().split()]


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="HEAD")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("bench_args", nargs="*")
    args = parser.parse_args()
    bench_args = args.bench_args or ["--lines", "150000", "--slow-lines", "150000", "--presses", "40"]
    with tempfile.TemporaryDirectory(prefix="ab-console-") as tmp:
        base = Path(tmp) / "base"
        extract(args.base, base)
        sides = {f"base {args.base}": base, "this tree": REPO}
        pooled: dict[str, list[float]] = {name: [] for name in sides}
        for r in range(args.rounds):
            order = list(sides.items()) if r % 2 == 0 else list(reversed(sides.items()))
            for name, tree in order:
                lat = one_run(tree, bench_args, Path(tmp) / "lat.txt")
                pooled[name] += lat
                print(f"round {r + 1} {name}: median {statistics.median(lat) * 1000:.1f} ms, p95 "
                      f"{p95(lat) * 1000:.1f} ms ({len(lat)} presses, load {os.getloadavg()[0]:.1f})", flush=True)
        for name, lat in pooled.items():
            print(f"console_key_latency_ab [{name}]: median {statistics.median(lat) * 1000:.1f} ms, "
                  f"p95 {p95(lat) * 1000:.1f} ms over {len(lat)} presses (target p95 < 50 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

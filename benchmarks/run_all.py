"""Run every benchmarks/bench_*.py in its own process and print their figures.

Each benchmark prints lines of `name: value unit` (and may print context). A failing benchmark
is reported and makes the exit code non-zero, the others still run. At the end, the figures that
name their floor, target or bound are printed again together, each with the load it was measured
under (`python benchmarks/run_all.py throughput ingest` runs only those benchmarks)."""

import subprocess
import sys
import time
from pathlib import Path

here = Path(__file__).resolve().parent
failed = []
against_floor = []
only = set(sys.argv[1:])
for bench in sorted(here.glob("bench_*.py")):
    if only and bench.stem.removeprefix("bench_") not in only:
        continue
    print(f"== {bench.stem} ==", flush=True)
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, str(bench)], cwd=here.parent, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        print(line, end="", flush=True)
        if any(word in line for word in ("floor", "target", "bound")) and "load" in line:
            against_floor.append(f"{bench.stem.removeprefix('bench_')}: {line.strip()}")
    proc.wait()
    print(f"   ({time.time() - t0:.1f}s)\n", flush=True)
    if proc.returncode:
        failed.append(bench.stem)
if against_floor:
    print("== figures beside their floors (and the load they were measured under) ==")
    for line in against_floor:
        print(line)
if failed:
    print("failed:", ", ".join(failed))
    sys.exit(1)

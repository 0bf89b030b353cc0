"""Run every benchmarks/bench_*.py in its own process and print their figures.

Each benchmark prints lines of `name: value unit` (and may print context). A failing benchmark
is reported and makes the exit code non-zero, the others still run."""

import subprocess
import sys
import time
from pathlib import Path

here = Path(__file__).resolve().parent
failed = []
only = set(sys.argv[1:])
for bench in sorted(here.glob("bench_*.py")):
    if only and bench.stem.removeprefix("bench_") not in only:
        continue
    print(f"== {bench.stem} ==", flush=True)
    t0 = time.time()
    proc = subprocess.run([sys.executable, str(bench)], cwd=here.parent)
    print(f"   ({time.time() - t0:.1f}s)\n", flush=True)
    if proc.returncode:
        failed.append(bench.stem)
if failed:
    print("failed:", ", ".join(failed))
    sys.exit(1)

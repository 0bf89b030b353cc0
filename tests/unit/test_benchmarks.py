"""`make bench` is not part of `make test`, so a refactor that moves a module or splits a dataclass
used to break a benchmark unseen (the engine carve; the typed RunRecord; LaunchSpec's own parts).
Here: every benchmark names only what exists (tests/support/bench_names.py, every benchmarks/*.py
read), the checker bites, and the two benchmarks that are cheap at a small size run whole."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.bench_names import REPO, problems


def _run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def test_the_checker_finds_a_moved_module_a_missing_name_and_calls_that_do_not_bind(tmp_path):
    bench = tmp_path / "bench_broken.py"
    bench.write_text("from autorl_tui.no_such_package import LaunchSpec\n"
                     "from autorl_tui.executors.base import LaunchSpec as Spec, NoSuchThing\n"
                     "def main():\n"
                     "    from autorl_tui.store.db import Store\n"
                     "    Spec('r', 1, 'true', 'ws', {}, 'logs', 0.0, grading_socket=None)\n"
                     "    Store('x.db', flush_rows=5)\n"
                     "    from autorl_tui.tasks.webshop.provider import build_split\n"
                     "    build_split(None, 'train')\n"
                     "    build_split(*[None, 'train', b''])\n")
    found = problems(bench)
    assert len(found) == 4, found
    assert "bench_broken.py:1: `autorl_tui.no_such_package` does not import" in found[0]
    assert found[1] == "bench_broken.py:2: `autorl_tui.executors.base` has no `NoSuchThing`"
    assert found[2] == ("bench_broken.py:5: `Spec(...)` does not fit its signature: "
                        "got an unexpected keyword argument 'grading_socket'")
    assert found[3] == ("bench_broken.py:8: `build_split(...)` does not fit its signature: "
                        "missing a required argument: 'secret'")


@pytest.mark.subprocess
def test_every_benchmark_names_only_what_exists():
    proc = _run(["-m", "tests.support.bench_names"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    n = len(list((REPO / "benchmarks").glob("*.py")))
    assert f"{n} benchmark files read, 0 problems" in proc.stdout


@pytest.mark.subprocess
def test_the_ingest_and_scheduler_benchmarks_run_at_a_small_size():
    ingest = _run([str(Path("benchmarks") / "bench_ingest.py")], env={"BENCH_INGEST_LINES": "2000"})
    assert ingest.returncode == 0, ingest.stdout + ingest.stderr
    figure = re.search(r"ingest_over_executemany: ([\d.]+) \(target <= 1.5; 2000 stdout lines", ingest.stdout)
    assert figure and float(figure.group(1)) > 0, ingest.stdout
    scheduler = _run([str(Path("benchmarks") / "bench_scheduler.py")])
    assert scheduler.returncode == 0, scheduler.stdout + scheduler.stderr
    assert re.search(r"^sched_mean_gain_over_fifo: -?[\d.]+ points$", scheduler.stdout, re.M), scheduler.stdout

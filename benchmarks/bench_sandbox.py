"""Sandbox throughput: executions per second of a trivial program and of a HumanEval canonical
solution with its tests, one at a time and with 2 workers, with the fork server (the default when
run as root) and with one interpreter per program (the fallback); and checks per second the way
the unit_tests scorer checks code (tests in this process, the solution in the sandbox, calls over
the channel: grading/code_protocol.py)."""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autorl_tui.grading.sandbox import Sandbox, SandboxLimits  # noqa: E402
from autorl_tui.grading.code_protocol import run_check  # noqa: E402
from autorl_tui.grading.scorers.unit_tests import solution_source  # noqa: E402
from autorl_tui.tasks.humaneval.provider import bundled_problems  # noqa: E402

N = int(os.environ.get("BENCH_SANDBOX_N", "40"))


def rate(sb: Sandbox, programs: list[str], parallel: bool) -> float:
    t0 = time.perf_counter()
    outs = sb.run_many(programs) if parallel else [sb.run(p) for p in programs]
    dt = time.perf_counter() - t0
    failed = [o for o in outs if not o.passed]
    if failed:
        raise SystemExit(f"benchmark program failed in the sandbox: {failed[0].reason} {failed[0].error}")
    return len(programs) / dt


def main() -> None:
    problems = {p["task_id"]: p for p in bundled_problems()}
    p = problems["HumanEval/0"]
    item = {"id": p["task_id"], "prompt": p["prompt"], "entry_point": p["entry_point"], "test": p["test"]}
    solution = solution_source(item, p["canonical_solution"])
    humaneval = f"{solution}\n\n{item['test']}\n\ncheck({item['entry_point']})\n"
    trivial = "pass\n"
    print(f"load_average_1min: {os.getloadavg()[0]:.1f} (on {os.cpu_count()} CPUs; figures scale with free CPU)")
    for mode, forkserver in (("forkserver", True), ("oneshot", False)):
        t0 = time.perf_counter()
        sb = Sandbox(SandboxLimits(), workers=2, forkserver=forkserver)
        print(f"sandbox_{mode}_setup: {1000 * (time.perf_counter() - t0):.1f} ms")
        print("isolation: " + "; ".join(f"{k}={v}" for k, v in sb.isolation.items()))
        sb.run_many([trivial, trivial])   # start both workers, warm the page cache
        print(f"sandbox_{mode}_trivial_serial: {rate(sb, [trivial] * N, False):.1f} executions/s")
        print(f"sandbox_{mode}_humaneval_serial: {rate(sb, [humaneval] * N, False):.1f} executions/s")
        print(f"sandbox_{mode}_trivial_2workers: {rate(sb, [trivial] * N, True):.1f} executions/s")
        print(f"sandbox_{mode}_humaneval_2workers: {rate(sb, [humaneval] * N, True):.1f} executions/s")
        t0 = time.perf_counter()
        checks = [run_check(sb, item, solution, 10.0) for _ in range(N)]
        if not all(c.passed for c in checks):
            raise SystemExit(f"benchmark check failed: {next(c.error for c in checks if not c.passed)}")
        print(f"sandbox_{mode}_humaneval_checked_serial: {N / (time.perf_counter() - t0):.1f} checks/s")
        sb.close()


if __name__ == "__main__":
    main()

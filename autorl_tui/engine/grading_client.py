"""Starts the grader worker (a subprocess per evaluation) and reads its result. CPU- and
GPU-heavy work never runs in the engine's process, so the console stays responsive."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from autorl_tui.engine.safe_files import read_regular
from autorl_tui.grading.progress import PROGRESS_FILE

GRADER_MODULE = "autorl_tui.grading.worker"


@dataclass
class GradingOutcome:
    ok: bool
    score: float | None = None
    metrics: dict = field(default_factory=dict)
    samples: list[dict] = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    grader_version: str | None = None
    error: str | None = None
    error_kind: str | None = None
    wall_s: float = 0.0


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """The worker leads its own process group (start_new_session): end the whole group, so a hung
    worker's children cannot outlive it or keep holding the grading slot's resources."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.returncode is None:
        await proc.wait()


ProgressCallback = Callable[[int, int, str], None]
PROGRESS_POLL_S = 0.5
PROGRESS_EVERY_S = 2.0      # report at most this often, unless done moved by PROGRESS_STEP of total
PROGRESS_STEP = 0.10


def read_progress(work_dir: Path) -> tuple[int, int, str] | None:
    """The worker's progress file, or None while it has none or it is garbage (the worker runs an
    untrusted model: a bounded read of a regular file, and only sane numbers are believed)."""
    try:
        msg = json.loads(read_regular(work_dir, PROGRESS_FILE, 4096))
        done, total, stage = msg["done"], msg["total"], msg["stage"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if not (type(done) is int and type(total) is int and isinstance(stage, str)) or not 0 <= done <= total:
        return None
    return done, total, stage[:20]


class _ProgressThrottle:
    def __init__(self, callback: ProgressCallback):
        self.callback = callback
        self.last: tuple[int, int, str] | None = None
        self.last_t = 0.0

    def offer(self, progress: tuple[int, int, str] | None, *, final: bool = False) -> None:
        if progress is None or progress == self.last:
            return
        done, total, stage = progress
        prev_done = self.last[0] if self.last and self.last[1:] == (total, stage) else None
        due = (prev_done is None or done == total or final or time.monotonic() - self.last_t >= PROGRESS_EVERY_S
               or done - prev_done >= PROGRESS_STEP * total)
        if due:
            self.last, self.last_t = progress, time.monotonic()
            self.callback(done, total, stage)


async def _wait(proc: asyncio.subprocess.Process, work_dir: Path, timeout_s: float | None,
                on_progress: ProgressCallback | None) -> None:
    """proc.wait() within timeout_s (asyncio.TimeoutError past it), passing the worker's progress
    to on_progress while it runs."""
    if on_progress is None:
        await asyncio.wait_for(proc.wait(), timeout_s)
        return
    throttle = _ProgressThrottle(on_progress)
    end = None if timeout_s is None else time.monotonic() + timeout_s
    waiter = asyncio.ensure_future(proc.wait())
    try:
        while not waiter.done():
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                raise asyncio.TimeoutError
            await asyncio.wait({waiter}, timeout=PROGRESS_POLL_S if left is None else min(PROGRESS_POLL_S, left))
            throttle.offer(read_progress(work_dir), final=waiter.done())
    finally:
        waiter.cancel()


async def run_grader(request: dict, work_dir: Path, *, gpus: list[str] | None = None, threads: int = 1,
                     timeout_s: float | None = None, python: str | None = None,
                     on_progress: ProgressCallback | None = None) -> GradingOutcome:
    """on_progress(done, total, stage), when given, hears the worker's progress while it runs (at
    most every PROGRESS_EVERY_S seconds, or sooner on a step of PROGRESS_STEP of the total)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    req_path, res_path = work_dir / "request.json", work_dir / "result.json"
    res_path.unlink(missing_ok=True)
    (work_dir / PROGRESS_FILE).unlink(missing_ok=True)
    req_path.write_text(json.dumps(request))
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "HOME", "TMPDIR", "ALFWORLD_DATA")}
    env.update({"CUDA_VISIBLE_DEVICES": ",".join(gpus or []), "OMP_NUM_THREADS": str(threads),
                "MKL_NUM_THREADS": str(threads), "GOMP_SPINCOUNT": "1000", "TOKENIZERS_PARALLELISM": "false",
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    for key in request.get("pass_env", []):
        if key in os.environ:
            env[key] = os.environ[key]
    t0 = time.time()
    with open(work_dir / "worker.log", "wb") as log:
        proc = await asyncio.create_subprocess_exec(python or sys.executable, "-m", GRADER_MODULE, str(req_path),
                                                    str(res_path), stdin=asyncio.subprocess.DEVNULL, stdout=log,
                                                    stderr=log, env=env, start_new_session=True)
        try:
            await _wait(proc, work_dir, timeout_s, on_progress)
        except asyncio.TimeoutError:
            await _kill_group(proc)
            return GradingOutcome(ok=False, error=f"grading timed out after {timeout_s:.0f}s and was stopped: the "
                                                  f"model took too long to load or answer (check its size, its "
                                                  f"generation settings and its tokenizer's chat template)",
                                  error_kind="timeout", wall_s=time.time() - t0)
        except asyncio.CancelledError:
            await _kill_group(proc)
            raise
        await _kill_group(proc)        # anything the worker left behind in its group
    wall = time.time() - t0
    try:
        result = json.loads(res_path.read_text())
    except (OSError, ValueError):
        tail = (work_dir / "worker.log").read_text(errors="replace")[-2000:]
        return GradingOutcome(ok=False, error=f"grader worker exited with code {proc.returncode} without a result: "
                                               f"{tail.strip().splitlines()[-1] if tail.strip() else 'no output'}",
                              error_kind="internal", wall_s=wall)
    if not result.get("ok"):
        return GradingOutcome(ok=False, error=result.get("error"), error_kind=result.get("error_kind", "internal"),
                              grader_version=result.get("grader_version"), wall_s=wall)
    return GradingOutcome(ok=True, score=float(result["score"]), metrics=result.get("metrics", {}),
                          samples=result.get("samples", []), timings=result.get("timings", {}),
                          grader_version=result.get("grader_version"), wall_s=wall)

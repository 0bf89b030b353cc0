"""The one way tests wait: poll a condition until it holds or a time limit passes, never a fixed sleep.

    value = wait_for(lambda: store_row(run)["state"] == "done" and store_row(run), 60, "the run to finish")
    await until(pilot, lambda: app.screen.id == "run", 10, "the run screen")   # a Textual pilot

`wait_for` returns the condition's first truthy value and raises `WaitTimeout` (an AssertionError
naming what was awaited) when the time runs out; with `proc`, it fails as soon as that process has
exited, with the end of its output; `tolerate` lists exceptions that mean "not yet" (a store being
written). `holds_within` is the same wait as a bool, for `assert holds_within(...), "why"`.
"""
from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """The condition did not hold within the time limit."""


def _exited(proc: subprocess.Popen | None, what: str) -> AssertionError | None:
    if proc is None or proc.poll() is None:
        return None
    out = proc.stdout.read() if proc.stdout is not None else ""
    return AssertionError(f"the process exited ({proc.returncode}) while waiting for {what}: {str(out)[-3000:]}")


def _check(condition: Callable[[], T], tolerate: tuple[type[BaseException], ...]) -> T | None:
    try:
        return condition()
    except tolerate:
        return None


def wait_for(condition: Callable[[], T], timeout: float, what: str = "a condition", *, interval: float = 0.1,
             proc: subprocess.Popen | None = None, tolerate: tuple[type[BaseException], ...] = ()) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = _check(condition, tolerate)
        if value:
            return value
        if (error := _exited(proc, what)) is not None:
            raise error
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def holds_within(condition: Callable[[], Any], timeout: float, *, interval: float = 0.1,
                 tolerate: tuple[type[BaseException], ...] = ()) -> bool:
    try:
        wait_for(condition, timeout, interval=interval, tolerate=tolerate)
    except WaitTimeout:
        return False
    return True


async def wait_for_async(condition: Callable[[], T], timeout: float, what: str = "a condition", *,
                         interval: float = 0.1, sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
                         tolerate: tuple[type[BaseException], ...] = ()) -> T:
    """`wait_for` inside an event loop: the loop runs while it waits (`sleep` is awaited between checks)."""
    deadline = time.monotonic() + timeout
    while True:
        value = _check(condition, tolerate)
        if value:
            return value
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:g} s waiting for {what}")
        await sleep(interval)


async def until(pilot: Any, condition: Callable[[], T], timeout: float = 30.0, what: str = "a condition",
                interval: float = 0.05) -> T:
    """Wait in a Textual test: the app processes its messages between checks (`pilot.pause`)."""
    return await wait_for_async(condition, timeout, what, interval=interval, sleep=pilot.pause)

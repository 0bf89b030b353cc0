"""The tests' one wait helper (tests/support/waiting.py)."""
import asyncio
import sqlite3
import subprocess
import threading
import time

import pytest

from tests.support.waiting import WaitTimeout, holds_within, wait_for, wait_for_async


def _set_later(event: threading.Event, after_s: float) -> threading.Thread:
    t = threading.Thread(target=lambda: (time.sleep(after_s), event.set()))
    t.start()
    return t


def test_returns_the_first_truthy_value_once_the_condition_holds():
    flag = threading.Event()
    t = _set_later(flag, 0.2)
    value = wait_for(lambda: flag.is_set() and ["ready"], 10, "the flag", interval=0.02)
    t.join()
    assert value == ["ready"]


def test_a_condition_that_never_holds_fails_naming_what_was_awaited_after_the_limit():
    t0 = time.monotonic()
    with pytest.raises(WaitTimeout, match=r"timed out after 0.3 s waiting for the moon"):
        wait_for(lambda: None, 0.3, "the moon", interval=0.02)
    assert time.monotonic() - t0 >= 0.3
    assert not holds_within(lambda: False, 0.1, interval=0.02)
    assert holds_within(lambda: True, 0.1)


def test_tolerated_errors_mean_not_yet_and_others_propagate():
    calls = []

    def locked_then_ready():
        calls.append(1)
        if len(calls) < 3:
            raise sqlite3.OperationalError("database is locked")
        return True

    assert wait_for(locked_then_ready, 10, interval=0.01, tolerate=(sqlite3.Error,)) is True
    with pytest.raises(ZeroDivisionError):
        wait_for(lambda: 1 / 0, 10)


@pytest.mark.subprocess
def test_a_watched_process_that_exits_fails_the_wait_at_once_with_its_output():
    proc = subprocess.Popen(["sh", "-c", "echo the engine gave up; exit 3"], stdout=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    with pytest.raises(AssertionError, match=r"exited \(3\) while waiting for the run.*the engine gave up"):
        wait_for(lambda: False, 60, "the run", proc=proc, interval=0.02)
    assert time.monotonic() - t0 < 30


def test_the_async_wait_lets_the_loop_run_between_checks():
    async def main():
        seen = []

        async def writer():
            await asyncio.sleep(0.1)
            seen.append("written")

        task = asyncio.create_task(writer())
        got = await wait_for_async(lambda: seen and seen[0], 10, "the writer", interval=0.01)
        await task
        with pytest.raises(WaitTimeout):
            await wait_for_async(lambda: False, 0.1, interval=0.01)
        return got

    assert asyncio.run(main()) == "written"

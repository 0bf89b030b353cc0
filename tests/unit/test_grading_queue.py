"""The engine's grading queue (grading_host/grading_queue.py): slots, each run's order, fairness
between runs, the position a waiting grading is told, and cancellation."""

import asyncio

import pytest

from autorl_tui.grading_host.grading_queue import GradingQueue, default_slots
from autorl_tui.exitcodes import UsageError


async def _grade(queue, run_id, label, log, gate, positions):
    async with queue.slot(run_id, on_wait=lambda t: positions.__setitem__(label, t.position)):
        log.append(("start", label))
        await gate.wait()
        log.append(("end", label))


def test_a_burst_of_one_run_does_not_starve_a_neighbour_and_each_run_keeps_its_order():
    async def scenario():
        queue = GradingQueue(slots=2)
        log, positions, gates = [], {}, {}
        tasks = []
        for i in range(6):                      # run a: a burst of 6
            gates[f"a{i}"] = asyncio.Event()
            tasks.append(asyncio.create_task(_grade(queue, "a", f"a{i}", log, gates[f"a{i}"], positions)))
        for i in range(2):                      # run b: 2, after the burst
            gates[f"b{i}"] = asyncio.Event()
            tasks.append(asyncio.create_task(_grade(queue, "b", f"b{i}", log, gates[f"b{i}"], positions)))
        await asyncio.sleep(0)
        # One grading per run at a time: a0 and b0 hold the two slots, b0 not behind a's burst.
        assert [e for e in log if e[0] == "start"] == [("start", "a0"), ("start", "b0")]
        assert queue.running() == 2 and queue.waiting() == 6
        assert positions["b1"] == 2 and positions["a1"] == 1       # turns alternate between the runs
        order = ["a0", "b0", "a1", "b1", "a2", "a3", "a4", "a5"]
        for label in order:
            gates[label].set()
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        starts = [label for kind, label in log if kind == "start"]
        assert [s for s in starts if s.startswith("a")] == [f"a{i}" for i in range(6)]   # a's own order
        assert [s for s in starts if s.startswith("b")] == ["b0", "b1"]
        assert starts.index("b1") < starts.index("a2")          # b's second not behind a's whole burst
        assert queue.running() == 0 and queue.waiting() == 0

    asyncio.run(scenario())


def test_a_waiting_grading_cancelled_leaves_the_queue_and_frees_nothing_it_did_not_hold():
    async def scenario():
        queue = GradingQueue(slots=1)
        gate = asyncio.Event()
        log, positions = [], {}
        first = asyncio.create_task(_grade(queue, "a", "a0", log, gate, positions))
        second = asyncio.create_task(_grade(queue, "b", "b0", log, gate, positions))
        third = asyncio.create_task(_grade(queue, "c", "c0", log, gate, positions))
        await asyncio.sleep(0)
        assert positions == {"b0": 1, "c0": 2}
        second.cancel()
        await asyncio.gather(second, return_exceptions=True)
        assert queue.waiting() == 1 and queue.running() == 1
        gate.set()
        await asyncio.gather(first, third)
        assert [label for kind, label in log if kind == "start"] == ["a0", "c0"]
        assert queue.running() == 0

    asyncio.run(scenario())


def test_slots_default_to_cores_over_threads_and_a_bad_setting_is_a_usage_error(monkeypatch):
    monkeypatch.delenv("AUTORL_GRADING_SLOTS", raising=False)
    assert default_slots(16, 4, 0) == 4
    assert default_slots(2, 2, 0) == 1
    assert default_slots(16, 4, 2) == 2            # one per GPU
    monkeypatch.setenv("AUTORL_GRADING_SLOTS", "3")
    assert default_slots(2, 2, 0) == 3
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("AUTORL_GRADING_SLOTS", bad)
        with pytest.raises(UsageError, match="AUTORL_GRADING_SLOTS") as info:
            default_slots(2, 2, 0)
        assert isinstance(info.value, UsageError)

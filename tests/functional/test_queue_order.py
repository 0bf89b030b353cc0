"""Moving a queued run to the front puts it first in the order the scheduler starts runs, even past
runs of a higher priority (the console said "moved to the front" while it stayed behind them)."""

import asyncio

import pytest

from autorl_tui.catalog.plans import parse_plan
from autorl_tui.engine.engine import Engine
from autorl_tui.home import Home
from tests.support.harness import TASKS, home_with_tiny

PLAN = """
name: order
tasks: [arith-small]
agents: [baseline-copy]
models: [tiny]
seeds: [0, 1, 2]
budget: 60s
executor: local
isolation: none
"""


@pytest.fixture
def home(tiny_model_dir):
    yield from home_with_tiny(tiny_model_dir)


def test_move_to_front_passes_higher_priorities(home):
    async def scenario():
        engine = Engine(Home(home), tasks_dirs=[TASKS])
        await engine.start()
        try:
            engine.queue_paused = True          # nothing starts: only the order is looked at
            ids = await engine.enqueue_plan(parse_plan(PLAN))
            await engine.set_priority(ids[0], 5)
            before = [q.run_id for q in engine.store.queued_runs()]
            await engine.move_to_front(ids[2])
            after = [q.run_id for q in engine.store.queued_runs()]
            return ids, before, after
        finally:
            await engine.stop()

    ids, before, after = asyncio.run(scenario())
    assert before == [ids[0], ids[1], ids[2]]
    assert after[0] == ids[2], after
    assert after[1:] == [ids[0], ids[1]]       # the others keep their relative order

"""The RunSpec a plan's validation builds is what the store keeps and what a retry and the
supervisor read back: one typed run from plan to report (a real engine on a real store)."""

import asyncio

import pytest

from autorl_tui.catalog.plans import parse_plan
from autorl_tui.engine.engine import Engine
from autorl_tui.home import Home
from autorl_tui.store.queries import StoreReader
from autorl_tui.store.run_spec import RunSpec
from tests.support.harness import TASKS, home_with_tiny

PLAN = """
name: typed
tasks: [arith-small]
agents: [baseline-copy]
models: [tiny]
seeds: [7]
budget: 60s
executor: local
isolation: none
limits: {cpus: 1}
"""


@pytest.fixture
def home(tiny_model_dir):
    yield from home_with_tiny(tiny_model_dir)


def test_the_validated_spec_is_the_stored_one(home):
    plan = parse_plan(PLAN)

    async def scenario():
        engine = Engine(Home(home), tasks_dirs=[TASKS])
        await engine.start()
        try:
            engine.queue_paused = True          # nothing starts: the specs are looked at
            validated = engine._validate(plan.runs[0])
            [run_id] = await engine.enqueue_plan(plan)
            await engine.cancel(run_id)
            retry_id = await engine.retry(run_id)
            return validated, run_id, retry_id
        finally:
            await engine.stop()

    validated, run_id, retry_id = asyncio.run(scenario())
    assert isinstance(validated, RunSpec)
    with StoreReader.open(Home(home).store_path) as reader:
        stored, retried = reader.run(run_id), reader.run(retry_id)
    assert stored.spec == validated
    assert stored.spec.task["id"] == "arith-small" and stored.spec.seed == 7
    assert stored.spec.isolation == "none" and not stored.spec.isolated
    assert stored.spec.option("limits") == {"cpus": 1}
    # a retry is validated again from the stored spec's options and protocol: the same run
    assert retried.spec.options == stored.spec.options
    assert retried.spec.protocol_name == stored.spec.protocol_name
    # ... and its isolation: a retried `isolation: none` run is not put in a sandbox it never had
    assert retried.spec.isolation == "none" and not retried.spec.isolated

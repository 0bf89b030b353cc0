"""Infrastructure failures (a container that cannot start) are retried as new numbered attempts
after a backoff; the earlier attempts stay recorded. Agent failures are never retried."""

import asyncio
import shutil

import pytest

from autorl_tui.catalog.plans import parse_plan
from autorl_tui.engine.engine import Engine
from autorl_tui.engine.scheduling import RetryPolicy
from autorl_tui.home import Home
from tests.support.harness import TASKS, TEST_AGENTS, install_model, make_reachable_home

pytestmark = pytest.mark.slow


async def _run(home, plan_text, policy):
    engine = Engine(Home.open(str(home)), tasks_dirs=[TASKS], agents_dirs=[TEST_AGENTS])
    engine.retry_policy = policy
    await engine.start()
    try:
        [run_id] = await engine.enqueue_plan(parse_plan(plan_text))
        [row] = await asyncio.wait_for(engine.wait_runs([run_id]), 300)
        attempts = engine.store.query("SELECT number, state, error FROM attempts WHERE run_id=? ORDER BY number",
                                      (run_id,))
        events = [e["message"] for e in engine.store.query("SELECT message FROM events WHERE run_id=?", (run_id,))]
        return row, attempts, events
    finally:
        await engine.stop()


@pytest.mark.docker
def test_container_that_cannot_start_is_retried_then_fails(tiny_model_dir, docker_available):
    if not docker_available:
        pytest.skip("DOCKER ENGINE NOT REACHABLE: the infra retry test did not run")
    home = make_reachable_home()
    home.mkdir(parents=True)
    install_model(tiny_model_dir, home)
    plan = ("name: retry\ntasks: [arith-small]\nagents: [baseline-copy]\nmodels: [tiny]\nseeds: [0]\n"
            "budget: 60s\nexecutor: docker\nimage: autorl-test/no-such-image:never\n")
    row, attempts, events = asyncio.run(_run(home, plan, RetryPolicy(max_attempts=3, base_s=0.5, factor=2)))
    assert row["state"] == "failed" and row["failure_source"] == "infra"
    assert "after 3 attempt(s)" in row["end_reason"]
    assert [a["number"] for a in attempts] == [1, 2, 3]
    assert all(a["state"] == "failed" and a["error"] for a in attempts)
    assert sum("retrying as attempt" in m for m in events) == 2
    shutil.rmtree(home.parent, ignore_errors=True)


def test_agent_whose_command_cannot_start_is_not_retried(tiny_model_dir, tmp_path):
    home = make_reachable_home()
    home.mkdir(parents=True)
    install_model(tiny_model_dir, home)
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "broken.yaml").write_text("name: broken\ncommand: [/nonexistent/agent-binary]\n")
    plan = "name: broken\ntasks: [arith-small]\nagents: [broken]\nmodels: [tiny]\nseeds: [0]\nbudget: 60s\n"

    async def run():
        engine = Engine(Home.open(str(home)), tasks_dirs=[TASKS], agents_dirs=[agents])
        engine.retry_policy = RetryPolicy(max_attempts=3, base_s=0.5)
        await engine.start()
        try:
            [run_id] = await engine.enqueue_plan(parse_plan(plan))
            [row] = await asyncio.wait_for(engine.wait_runs([run_id]), 300)
            n = engine.store.one("SELECT COUNT(*) AS n FROM attempts WHERE run_id=?", (run_id,))["n"]
            return row, n
        finally:
            await engine.stop()

    row, n_attempts = asyncio.run(run())
    assert row["state"] == "failed" and row["failure_source"] == "agent"
    assert n_attempts == 1
    shutil.rmtree(home.parent, ignore_errors=True)


def test_token_budget_ends_the_agent(tiny_model_dir):
    home = make_reachable_home()
    home.mkdir(parents=True)
    install_model(tiny_model_dir, home)
    plan = ("name: tokens\ntasks: [arith-small]\nagents: [test-token-burner]\nmodels: [tiny]\nseeds: [0]\n"
            "budget: 120s\ntoken_budget: 1000\n")
    row, attempts, events = asyncio.run(_run(home, plan, RetryPolicy()))
    assert row["tokens_in"] + row["tokens_out"] > 1000
    assert row["state"] == "failed" and row["failure_source"] == "budget"
    assert "token budget exhausted" in row["end_reason"]
    assert row["ended_at"] - row["started_at"] < 60          # well before the wall-clock budget
    assert attempts[0]["state"] == "killed"
    shutil.rmtree(home.parent, ignore_errors=True)

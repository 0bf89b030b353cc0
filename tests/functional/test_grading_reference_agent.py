"""The reference agent against a hand-laid workspace and the stand-in grading API (a real HTTP
server on 127.0.0.1 grading with the real worker subprocess; see tests/standin_grading.py).
Its training is shortened by options so that the test stays short; the calibrated defaults are
measured by scripts/calibrate_reference.py."""

import json
import subprocess
import sys
import time

import pytest

from autorl_tui.catalog.agents import builtin_agents_dir, find_agent, agent_search_path
from autorl_tui.catalog.tasks import find_task, materialize, task_search_path
from tests.standin_grading import StandinGradingServer, make_workspace

AGENT = builtin_agents_dir() / "reference" / "agent.py"


def test_reference_spec_is_found_and_launches_its_program():
    spec = find_agent("reference", agent_search_path())
    assert "{python}" in spec.command and "reference/agent.py" in spec.command
    assert (spec.agent_dir / "reference" / "agent.py").exists()


@pytest.mark.slow
def test_reference_agent_trains_submits_and_respects_its_deadline(tmp_path, tiny_model_dir):
    card = find_task("arith", task_search_path())
    cache = tmp_path / "cache"
    dev = materialize(card, "dev", cache)
    ws = tmp_path / "ws"
    budget = 240.0
    env = make_workspace(ws, card, tiny_model_dir, cache, budget, seed=0)
    deadline = float(env["RUN_DEADLINE"])
    with StandinGradingServer(ws, card, dev, tmp_path / "grading", deadline, baseline_score=5.0, threads=1,
                              limit=20) as srv:
        env["GRADING_SERVER_URL"] = srv.url
        proc = subprocess.run([sys.executable, str(AGENT), "sft_steps=12", "sft_batch=8", "grpo_steps=3",
                               "grpo_prompts=2", "grpo_gens=4", "grpo_rounds=1", "threads=1",
                               "submit_reserve_s=20"], cwd=ws, env=env, capture_output=True, text=True,
                              timeout=budget + 60)
        finished = time.time()
        subs = list(srv.submissions)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert finished <= deadline, "the agent overran its deadline"
    assert [s["model_path"] for s in subs] == ["output/v1", "output/v2"], proc.stdout[-3000:]
    assert all(0 <= s["score"] <= 100 for s in subs)
    assert {p.name for p in (ws / "code").glob("*.py")} >= {"sft.py", "grpo.py", "metrics_callback.py"}
    for v in ("v1", "v2"):   # full models, no adapters, no temp folders
        assert (ws / "output" / v / "config.json").exists() and list((ws / "output" / v).glob("*.safetensors"))
    assert not list((ws / "output").glob("*.partial"))
    lines = [json.loads(x) for x in (ws / "logs" / "metrics.jsonl").read_text().splitlines()]
    assert all(set(x) == {"ts", "step", "phase", "metrics"} for x in lines)
    sft_keys = set().union(*(x["metrics"] for x in lines if x["phase"] == "sft"))
    grpo_keys = set().union(*(x["metrics"] for x in lines if x["phase"] == "grpo"))
    assert {"loss", "learning_rate"} <= sft_keys
    assert {"reward", "reward_std", "kl", "completions/mean_length"} <= grpo_keys
    assert "dev score" in proc.stdout

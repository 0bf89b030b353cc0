"""The reference agent's option parsing and deadline reading (no training)."""

import importlib.util
import json
import time

import pytest

from autorl_tui.catalog.agents import builtin_agents_dir


@pytest.fixture
def agent():
    spec = importlib.util.spec_from_file_location("reference_agent", builtin_agents_dir() / "reference" / "agent.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_options_from_env_and_args(agent, monkeypatch):
    monkeypatch.setenv("REFERENCE_AGENT_OPTIONS", "sft_steps=100, lora=16")
    opts = agent.parse_options(["grpo_lr=1e-4"])
    assert opts["sft_steps"] == 100 and isinstance(opts["sft_steps"], int)
    assert opts["lora"] == 16 and opts["grpo_lr"] == 1e-4
    with pytest.raises(SystemExit, match="bad option 'nope=1'"):
        agent.parse_options(["nope=1"])


def test_deadline_is_the_earliest_stated(agent, tmp_path, monkeypatch):
    now = time.time()
    (tmp_path / "models" / "tiny").mkdir(parents=True)
    (tmp_path / "run_meta.json").write_text(json.dumps({"start_time": now, "timeout_s": 100,
                                                        "deadline": "2999-01-01T00:00:00+00:00"}))
    monkeypatch.setenv("WORKSPACE", str(tmp_path))
    monkeypatch.delenv("GRADING_SERVER_URL", raising=False)
    monkeypatch.setenv("RUN_DEADLINE", str(now + 200))
    ws = agent.Workspace()
    assert ws.deadline() == pytest.approx(now + 100)
    monkeypatch.setenv("RUN_DEADLINE", str(now + 50))
    assert ws.deadline() == pytest.approx(now + 50)

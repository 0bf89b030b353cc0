"""A prompt's budget and refusal (vLLM's rules, grading/context_budget.py), and their tally."""

from autorl_tui.grading import context_budget, episodes
from autorl_tui.grading.types import Completion
from autorl_tui.scores import FAILURE_KINDS


def test_refusal_follows_vllm():
    assert context_budget.refusal(10, 256) is None
    assert context_budget.refusal(255, 256) is None
    assert "256 tokens and the model's context holds 256" in context_budget.refusal(256, 256)
    assert "900 tokens" in context_budget.refusal(900, 256)
    assert "empty" in context_budget.refusal(0, 256)
    assert context_budget.refusal(10**6, None) is None        # no known limit: only vLLM's own check


def test_budget_is_the_prompts_own():
    assert context_budget.budget(10, 64, 256) == 64
    assert context_budget.budget(246, 64, 256) == 10
    assert context_budget.budget(255, 64, 256) == 1
    assert context_budget.budget(10, 64, None) == 64


def test_tally_and_the_failure_kind():
    assert context_budget.REFUSED in FAILURE_KINDS and episodes.REFUSED == context_budget.REFUSED
    tally = context_budget.Tally(256)
    refused = Completion("", 0, "prompt_too_long", error="the prompt has 300 tokens", budget=0, prompt_tokens=300)
    tally.add([[refused], [Completion("x", 1, "stop", budget=64)], [Completion("y", 10, "length", budget=10)]], 64)
    tally.add([[Completion("z", 3, "stop")]], 64)             # a backend that says no budget
    assert tally.to_dict() == {"limit": 256, "prompts": 4, "prompts_refused": 1, "budget_capped": 1}
    assert context_budget.refused(refused) == "the prompt has 300 tokens"
    assert context_budget.refused(Completion("x", 1, "stop")) is None

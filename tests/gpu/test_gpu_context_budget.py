"""On a real NVIDIA GPU: a prompt's budget is its own on cuda too (grading/context_budget.py), and
a prompt that fills the context is refused there as on the CPU. Without CUDA every test here
SKIPS, loudly (scripts/gpu-check.sh runs tests/gpu on a GPU machine)."""

import pytest

from tests.support.context_prompts import prompt_of


def _cuda() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    return None if torch.cuda.is_available() else "no CUDA device (torch.cuda.is_available() is False)"


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_cuda() is not None, reason=f"GPU test: {_cuda()}")]


def test_on_cuda_a_prompts_budget_is_its_own_and_a_full_context_is_refused(tiny_model_dir):
    from autorl_tui.grading.inference import TransformersPolicy

    gpu = TransformersPolicy(tiny_model_dir, device="cuda", batch_size=64, prompt_format="plain")
    limit = gpu.max_positions
    short = "Question: Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?\nAnswer:"
    long, over = prompt_of(gpu.tokenizer, limit - 10), prompt_of(gpu.tokenizer, limit + 5)
    alone = gpu.generate([short], max_tokens=40)[0][0]
    batched = gpu.generate([long, short, over], max_tokens=40)
    assert (batched[1][0].text, batched[1][0].tokens, batched[1][0].budget) == (alone.text, alone.tokens, 40)
    assert batched[0][0].budget == 10 and batched[0][0].tokens <= 10
    assert batched[2][0].finish_reason == "prompt_too_long" and f"holds {limit}" in batched[2][0].error

"""The vLLM backend kept warm (issue 18): one engine per device group, weights reloaded in place
when the architecture and tokenizer match. The engine needs an NVIDIA GPU and the `gpu` extra;
without them the GPU test SKIPS (loudly: the path is then untested on this machine)."""

import json
import os
import shutil
import warnings

import pytest

from autorl_tui.grading.inference import vllm_signature


def _copy(src, dst, **config_changes):
    shutil.copytree(src, dst)
    if config_changes:
        config = json.loads((dst / "config.json").read_text())
        config.update(config_changes)
        (dst / "config.json").write_text(json.dumps(config))
    return dst


def test_the_reload_signature_follows_architecture_and_tokenizer_not_weights(tmp_path, tiny_model_dir):
    from safetensors.torch import load_file, save_file

    same = _copy(tiny_model_dir, tmp_path / "same")
    [weights] = same.glob("*.safetensors")
    save_file({k: v * 1.5 for k, v in load_file(weights).items()}, weights, metadata={"format": "pt"})
    assert vllm_signature(same) == vllm_signature(tiny_model_dir)          # new weights: reload in place
    wider = _copy(tiny_model_dir, tmp_path / "wider", hidden_size=256)
    assert vllm_signature(wider) != vllm_signature(tiny_model_dir)         # other shapes: a fresh engine
    retok = _copy(tiny_model_dir, tmp_path / "retok")
    config = json.loads((retok / "tokenizer_config.json").read_text())
    config["eos_token"] = "<|pad|>"
    (retok / "tokenizer_config.json").write_text(json.dumps(config))
    assert vllm_signature(retok) != vllm_signature(tiny_model_dir)         # other tokenizer: a fresh engine


def _gpu_ready() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "NO GPU on this machine"
    try:
        import vllm  # noqa: F401
    except ImportError:
        return "vllm is not installed (the optional `gpu` extra)"
    return None


def _require_gpu(what: str) -> None:
    why = _gpu_ready()
    if why:
        message = f"SKIPPED LOUDLY: {why}: {what} is NOT tested here; run this on a GPU"
        warnings.warn(message, stacklevel=2)
        print(message)
        pytest.skip(message)


def test_vllm_reloads_new_weights_in_place_and_scores_as_a_fresh_engine(tmp_path, tiny_model_dir):
    _require_gpu("the vLLM warm path (reload in place)")
    from autorl_tui.grading import inference
    from safetensors.torch import load_file, save_file

    v2 = _copy(tiny_model_dir, tmp_path / "v2")
    [weights] = v2.glob("*.safetensors")
    save_file({k: v * 1.1 for k, v in load_file(weights).items()}, weights, metadata={"format": "pt"})
    prompts = ["What is 2 plus 3?", "Tom has 4 apples and gets 5 more. How many?"]
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")
    first = inference.VLLMPolicy(tiny_model_dir, prompt_format="chat")
    assert first.load_mode == "fresh"
    first.generate(prompts, max_tokens=16)
    warm = inference.VLLMPolicy(v2, prompt_format="chat")
    assert warm.load_mode == "reloaded" and warm.llm is first.llm
    warm_out = [c[0].text for c in warm.generate(prompts, max_tokens=16)]
    inference._VLLM_ENGINES.clear()
    fresh = inference.VLLMPolicy(v2, prompt_format="chat")
    assert fresh.load_mode == "fresh"
    assert [c[0].text for c in fresh.generate(prompts, max_tokens=16)] == warm_out


def test_vllm_refuses_alone_a_prompt_that_fills_the_context(tiny_model_dir):
    """vLLM raises for a prompt of max_model_len tokens or more, which would end the whole call:
    the backend refuses it alone (grading/context_budget.py) and generates the others, each capped
    by the context by vLLM itself."""
    _require_gpu("the vLLM backend's context refusal")
    from autorl_tui.grading import inference
    from tests.support.context_prompts import prompt_of

    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")
    policy = inference.VLLMPolicy(tiny_model_dir, prompt_format="plain")
    limit = policy.max_positions
    assert limit == json.loads((tiny_model_dir / "config.json").read_text())["max_position_embeddings"]
    short = "Question: Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?\nAnswer:"
    near = prompt_of(policy.tokenizer, limit - 12)
    out = policy.generate([prompt_of(policy.tokenizer, limit + 30), short, near], max_tokens=40)
    assert out[0][0].finish_reason == "prompt_too_long" and f"holds {limit}" in out[0][0].error
    assert out[1][0].error is None and out[1][0].budget == 40 and out[1][0].finish_reason in ("stop", "length")
    assert out[2][0].prompt_tokens + out[2][0].tokens <= limit and out[2][0].budget == limit - out[2][0].prompt_tokens

"""The unit_tests scorer driven by a real (tiny, randomly initialized) transformers model: its
raw, mostly nonsensical generations must be graded without crashing, each failure classified."""

import pytest

from autorl_tui.grading.scorers import get_scorer
from autorl_tui.grading.types import FAILURE_KINDS, Completion, EvalProtocol, ScorerContext
from autorl_tui.tasks.humaneval.provider import bundled_problems

pytestmark = pytest.mark.slow


class TinyTransformersPolicy:
    """Plain-prompt generation with a real causal LM, like the grader's transformers backend."""

    def __init__(self):
        import torch
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers
        from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

        torch.manual_seed(0)
        torch.set_num_threads(1)
        alphabet = pre_tokenizers.ByteLevel.alphabet()
        vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
        vocab["<eos>"] = len(vocab)
        vocab["<pad>"] = len(vocab)
        tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        self.tok = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>")
        cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                          eos_token_id=vocab["<eos>"], pad_token_id=vocab["<pad>"], bos_token_id=None)
        self.model = LlamaForCausalLM(cfg).eval()
        self.torch = torch

    def generate(self, prompts, *, n=1, temperature=0.0, top_p=1.0, max_tokens=64, stop=None):
        results = []
        for prompt in prompts:
            ids = self.tok(prompt, return_tensors="pt")
            with self.torch.no_grad():
                out = self.model.generate(**ids, max_new_tokens=max_tokens, do_sample=False,
                                          pad_token_id=self.tok.pad_token_id)
            new = out[0][ids["input_ids"].shape[1]:]
            text = self.tok.decode(new, skip_special_tokens=True)
            finish = "length" if len(new) >= max_tokens else "stop"
            for s in stop or []:
                if s in text:
                    text, finish = text[: text.index(s)], "stop"
            results.append([Completion(text, len(new), finish) for _ in range(n)])
        return results


def test_unit_tests_scorer_with_a_real_model(tmp_path):
    problems = bundled_problems()[:4]
    items = [{"id": p["task_id"], "prompt": p["prompt"], "entry_point": p["entry_point"], "test": p["test"]}
             for p in problems]
    protocol = EvalProtocol(prompt_format="plain", max_tokens=24, stop=["\ndef ", "\nclass "])
    ctx = ScorerContext(tmp_path, "dev", tmp_path, tmp_path, {"timeout_s": 5, "workers": 2})
    result = get_scorer("unit_tests").evaluate(TinyTransformersPolicy(), items, protocol, ctx)
    assert len(result.samples) == 4 and 0.0 <= result.score <= 100.0
    for s in result.samples:
        assert s.output is not None and s.tokens is not None
        if not s.correct:
            assert s.failure_kind in FAILURE_KINDS and s.error, s
    assert result.metrics["n_problems"] == 4 and "pass@1" in result.metrics

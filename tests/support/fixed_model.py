"""A real (tiny) causal LM that answers every prompt with one text fixed when it is built: what a
model fine-tuned to emit hostile code would write, without training one.

Its vocabulary is four tokens: `<unk>` (every prompt word), `<eos>`, `<pad>` and the answer as a
single token. Attention and MLP outputs are zero, so each position's hidden state is its token's
embedding (one-hot); the LM head maps `<unk>` to the answer and everything else to `<eos>`. Greedy
decoding therefore emits the answer, then stops. Loaded by the grader's transformers backend like
any submission (safetensors, a tokenizer.json, no code)."""

from __future__ import annotations

import json
import os
from pathlib import Path

UNK, EOS, PAD, ANSWER = 0, 1, 2, 3


def build_fixed_answer_model(folder: Path, answer: str, *, max_positions: int = 4096,
                             chat_template: str | None = None) -> Path:
    """chat_template: for tasks with chat prompts (the answer is the same whatever it renders)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"<unk>": UNK, "<eos>": EOS, "<pad>": PAD, answer: ANSWER}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="<unk>", eos_token="<eos>", pad_token="<pad>")
    if chat_template is not None:
        tok.chat_template = chat_template
    size = len(vocab)
    cfg = LlamaConfig(vocab_size=size, hidden_size=size, intermediate_size=size, num_hidden_layers=1,
                      num_attention_heads=1, num_key_value_heads=1, max_position_embeddings=max_positions,
                      tie_word_embeddings=False, bos_token_id=None, eos_token_id=EOS, pad_token_id=PAD,
                      dtype="float32")
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.model.embed_tokens.weight.copy_(torch.eye(size))
        model.model.norm.weight.fill_(1.0)
        for layer in model.model.layers:
            layer.input_layernorm.weight.fill_(1.0)
            layer.post_attention_layernorm.weight.fill_(1.0)
        head = torch.zeros(size, size)
        head[ANSWER, UNK] = 1.0
        for token in (EOS, PAD, ANSWER):
            head[EOS, token] = 1.0
        model.lm_head.weight.copy_(head)
    model.generation_config.eos_token_id = EOS
    model.generation_config.pad_token_id = PAD
    model.save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)
    for path in [folder, *folder.rglob("*")]:      # the sandboxed grader's uid reads it
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    (folder / "fixed_answer.json").write_text(json.dumps({"answer": answer}))
    return folder

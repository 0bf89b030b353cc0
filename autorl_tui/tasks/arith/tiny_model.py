"""The built-in `tiny` base model, built on this machine with no downloads (registry kind `models`).

- Tokenizer: byte-level BPE trained with `tokenizers` on synthetic text; digits are split one per
  token (like Llama/Qwen), ChatML chat template, eos `<|im_end|>`, pad `<|pad|>`, left padding.
- Model: a Llama-style config of about 1 M parameters (hidden 128, 4 layers), fp32, safetensors.
- Pretraining: a short causal-LM pass (300 steps of 32 x 64 tokens) over generic sentences and chat-formatted word problems of
  the `arith` domain whose worked answers are right only 30% of the time. That gives the model the
  chat and `#### N` format and a little arithmetic, so its `arith` baseline is low but not zero.
  Pretraining questions come from the train-only question space of the `arith` generator, so no
  dev/test question is ever seen.

Deterministic: the same seed and steps give the same weights on the same torch build (training
always runs on BUILD_THREADS threads so that the reduction order does not depend on the machine).
Atomic: catalog/model_builds.build_atomically.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import time
from pathlib import Path

from autorl_tui import progress
from autorl_tui.catalog import model_builds
from autorl_tui.catalog.model_builds import (BUILD_INFO, CHAT_TEMPLATE, SPECIAL_TOKENS, build_atomically,
                                             chatml)
from autorl_tui.tasks.arith import generator as arith

TINY_VERSION = "1"
VOCAB_SIZE = 512
MAX_POSITIONS = 256
PRETRAIN_STEPS = 300
PRETRAIN_P_CORRECT = 0.3
PRETRAIN_BATCH = 32
PRETRAIN_DOCS = 12000
BUILD_THREADS = 2      # fixed, so the reduction order and thus the weights do not depend on the machine


def _train_only_problems(rng: random.Random, n: int) -> list[dict]:
    out = []
    while len(out) < n:
        x = arith.make_problem(rng)
        if arith.bucket(x["prompt"]) >= arith.HELD_OUT_BUCKETS:
            out.append(x)
    return out


def _generic_sentence(rng: random.Random) -> str:
    (name, pronoun), item = rng.choice(arith.NAMES), rng.choice(arith.ITEMS)
    a, b = rng.randint(1, 10), rng.randint(1, 10)
    other = rng.choice(arith.NAMES)[0]
    parts = [f"{name} likes {item}.", f"{pronoun} keeps {a} {item} in a box.",
             f"{name} counts {a} {item} and {b} {rng.choice(arith.ITEMS)}.",
             f"There are {a} {item} on the table.", f"{pronoun} has more {item} than {other}."]
    rng.shuffle(parts)
    return " ".join(parts[:3])


def _noisy_solution(x: dict, rng: random.Random) -> str:
    """The worked solution, right with probability PRETRAIN_P_CORRECT, else a plausible mistake."""
    if rng.random() < PRETRAIN_P_CORRECT:
        return x["solution"]
    m = re.match(r"(\d+) ([+-]) (\d+) =", x["solution"])
    a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
    if rng.random() < 0.4:        # the wrong operation
        return arith.worked_solution(a, b, "-" if op == "+" else "+")[0]
    c = abs((a + b if op == "+" else a - b) + rng.choice([-10, -2, -1, 1, 2, 10]))
    return f"{a} {op} {b} = {c}\n#### {c}"


def build_tokenizer(seed: int = 0):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(f"tiny-tokenizer/{seed}")
    corpus = []
    for x in _train_only_problems(rng, 2000):
        corpus.append(f"user\n{x['prompt']}\nassistant\n{x['solution']}")
        corpus.append(_generic_sentence(rng))
    corpus.append("0123456789 +-*/=#$.,")
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|pad|>", bos_token=None, unk_token=None,
        additional_special_tokens=["<|endoftext|>", "<|im_start|>"], model_max_length=MAX_POSITIONS,
        padding_side="left", chat_template=CHAT_TEMPLATE)


def _pretrain_corpus(tok, seed: int, n_docs: int):
    import torch

    rng = random.Random(f"tiny-pretrain/{seed}")
    problems = _train_only_problems(rng, n_docs)
    eot = tok.convert_tokens_to_ids("<|endoftext|>")
    texts = []
    for x in problems:
        if rng.random() < 0.7:
            msgs = [{"role": "user", "content": x["prompt"]},
                    {"role": "assistant", "content": _noisy_solution(x, rng)}]
            texts.append(chatml(msgs))
        else:
            texts.append(_generic_sentence(rng))
    ids: list[int] = []
    for enc in tok(texts, add_special_tokens=False)["input_ids"]:
        ids.extend(enc + [eot])
    return torch.tensor(ids)


def _pretrain(model, tok, seed: int, steps: int, docs: int, batch: int = PRETRAIN_BATCH, block: int = 64,
              lr: float = 3e-3) -> list:
    import torch

    data = _pretrain_corpus(tok, seed, docs)
    n_blocks = len(data) // block
    blocks = data[: n_blocks * block].view(n_blocks, block)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / max(1, steps)))))
    gen = torch.Generator().manual_seed(seed)
    model.train()
    curve = []
    for step in range(1, steps + 1):
        x = blocks[torch.randint(0, n_blocks, (batch,), generator=gen)]
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if step % 50 == 0 or step == steps:
            curve.append([step, round(loss.item(), 4)])
        progress.report("building the tiny model: pretraining steps", step, steps)
    model.eval()
    return curve


def _build_into(folder: Path, seed: int, pretrain_steps: int, pretrain_docs: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig, LlamaConfig
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    t0, cpu0 = time.time(), time.process_time()
    progress.report("building the tiny model: tokenizer and pretraining corpus")
    tok = build_tokenizer(seed)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=128, intermediate_size=512, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=MAX_POSITIONS,
                      rope_theta=10000.0, tie_word_embeddings=True, initializer_range=0.02, bos_token_id=None,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, dtype="float32")
    threads = torch.get_num_threads()
    torch.set_num_threads(BUILD_THREADS)
    try:
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(cfg)
        curve = _pretrain(model, tok, seed, pretrain_steps, pretrain_docs)
    finally:
        torch.set_num_threads(threads)
    model.generation_config = GenerationConfig(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                                               bos_token_id=None, do_sample=False, max_new_tokens=32)
    progress.report("building the tiny model: saving weights")
    model.save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)
    info = {"name": "tiny", "tiny_version": TINY_VERSION, "seed": seed, "pretrain_steps": pretrain_steps,
            "pretrain_docs": pretrain_docs,
            "pretrain_p_correct": PRETRAIN_P_CORRECT, "params": sum(p.numel() for p in model.parameters()),
            "loss_curve": curve, "build_s": round(time.time() - t0, 2),
            "build_cpu_s": round(time.process_time() - cpu0, 2), "torch": torch.__version__}
    (folder / BUILD_INFO).write_text(json.dumps(info, indent=1))
    return info


def build_tiny_model(out_dir: Path | str, seed: int = 0, force: bool = False,
                     pretrain_steps: int = PRETRAIN_STEPS, pretrain_docs: int = PRETRAIN_DOCS) -> Path:
    """Build `tiny` into `out_dir` unless it is already there (or `force`). Returns `out_dir`."""
    return build_atomically(out_dir, lambda tmp: _build_into(tmp, seed, pretrain_steps, pretrain_docs), force,
                            version=TINY_VERSION)


def source_key() -> str:
    """Changes whenever the code that determines the weights changes (for caches of built models)."""
    import torch

    h = hashlib.sha256(Path(__file__).read_bytes() + Path(arith.__file__).read_bytes()
                       + Path(model_builds.__file__).read_bytes() + torch.__version__.encode())
    return h.hexdigest()[:12]

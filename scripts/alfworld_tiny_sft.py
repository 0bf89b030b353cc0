"""ALFWorld on CPU: a tiny model's baseline, then SFT on the expert trajectories (TRL), scored by
the real `env_success` grader on the dev games.

The project's `tiny` model (catalog/tiny.py) has a 512-token vocabulary trained on arithmetic
text and 256 positions: ALFWorld prompts (room, history, available commands) are 300-700 words,
so this script builds an ALFWorld-sized tiny model instead (byte-level BPE trained on the train
split's text, Llama config, 1024 positions, randomly initialized), a proposal for a `tiny-alfworld`
build.

usage: python scripts/alfworld_tiny_sft.py SPLITS_DIR OUT_DIR [--steps 300] [--sft-file sft_prompt_completion.jsonl]
SPLITS_DIR holds the materialized train/ and dev/ folders. Prints JSON lines of figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
)
SPECIAL = ["<|pad|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def build_tokenizer(texts: list[str], vocab_size: int, max_positions: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|pad|>",
                                   additional_special_tokens=["<|endoftext|>", "<|im_start|>"],
                                   model_max_length=max_positions, padding_side="left", chat_template=CHAT_TEMPLATE)


def build_model(tok, hidden: int, layers: int, max_positions: int, seed: int = 0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=layers,
                      num_attention_heads=hidden // 32, num_key_value_heads=max(1, hidden // 64),
                      max_position_embeddings=max_positions, tie_word_embeddings=True,
                      bos_token_id=None, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    return LlamaForCausalLM(cfg)


class HFPolicy:
    """Greedy batched generation with a local transformers model (implements grading.types.Policy)."""

    def __init__(self, model, tok, batch_size: int = 16):
        self.model, self.tok, self.batch_size = model, tok, batch_size
        self.prompt_tokens = []

    def generate(self, prompts, *, n=1, temperature=0.0, top_p=1.0, max_tokens=48, stop=None):
        import torch
        from autorl_tui.grading.types import Completion
        self.model.eval()
        limit = self.model.config.max_position_embeddings - max_tokens
        out = []
        for i in range(0, len(prompts), self.batch_size):
            chunk = prompts[i:i + self.batch_size]
            texts = [self.tok.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in chunk]
            ids = [self.tok(t, add_special_tokens=False)["input_ids"][-limit:] for t in texts]
            self.prompt_tokens += [len(x) for x in ids]
            width = max(len(x) for x in ids)
            input_ids = torch.tensor([[self.tok.pad_token_id] * (width - len(x)) + x for x in ids])
            mask = (torch.arange(width)[None, :] >= torch.tensor([width - len(x) for x in ids])[:, None]).long()
            with torch.no_grad():
                gen = self.model.generate(input_ids=input_ids, attention_mask=mask, max_new_tokens=max_tokens,
                                          do_sample=False, eos_token_id=self.tok.eos_token_id,
                                          pad_token_id=self.tok.pad_token_id)
            for row in gen[:, width:]:
                toks = [t for t in row.tolist() if t != self.tok.pad_token_id]
                finished = self.tok.eos_token_id in toks
                if finished:
                    toks = toks[:toks.index(self.tok.eos_token_id)]
                out.append([Completion(self.tok.decode(toks, skip_special_tokens=True), len(toks),
                                       "stop" if finished else "length")] * n)
        return out


def score(policy, split_dir: Path, max_steps: int, log=lambda s: None) -> dict:
    from autorl_tui.catalog.tasks import load_task_card
    from autorl_tui.grading.scorers import get_scorer
    from autorl_tui.grading.types import EvalProtocol, ScorerContext
    card = load_task_card(REPO / "tasks" / "alfworld")
    protocol = EvalProtocol.from_dict({**card.protocol.to_dict(), "max_steps": max_steps})
    ctx = ScorerContext(task_dir=card.dir, split="dev", split_path=split_dir, scratch_dir=split_dir,
                        options=card.scorer_options, log=log)
    t0 = time.time()
    res = get_scorer("env_success").evaluate(policy, [], protocol, ctx)
    m = {k: (round(v, 2) if isinstance(v, float) else v) for k, v in res.metrics.items()}
    m["eval_s"] = round(time.time() - t0, 1)
    m["example"] = [(s["raw_output"], s["action"], s["feedback"][:60]) for s in res.samples[0].data["trajectory"][:6]]
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("splits")
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--bs", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--positions", type=int, default=1024)
    ap.add_argument("--max-steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sft-file", default="sft_prompt_completion.jsonl")
    ap.add_argument("--skip-baseline", action="store_true")
    a = ap.parse_args()
    os.environ.setdefault("GOMP_SPINCOUNT", "1000")
    import torch
    torch.set_num_threads(a.threads)
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    train, dev, out = Path(a.splits) / "train", Path(a.splits) / "dev", Path(a.out)
    rows = [json.loads(x) for x in (train / a.sft_file).read_text().splitlines()]
    texts = []
    for r in rows:
        texts += [m["content"] for m in r["prompt"]] + [m["content"] for m in r["completion"]]
    t0 = time.time()
    tok = build_tokenizer(texts, a.vocab, a.positions)
    model = build_model(tok, a.hidden, a.layers, a.positions)
    lengths = sorted(len(tok(tok.apply_chat_template(r["prompt"] + r["completion"], tokenize=False),
                             add_special_tokens=False)["input_ids"]) for r in rows[:400])
    print(json.dumps({"stage": "build", "params": sum(p.numel() for p in model.parameters()), "vocab": len(tok),
                      "sft_examples": len(rows), "tokens_median": lengths[len(lengths) // 2],
                      "tokens_max": lengths[-1], "build_s": round(time.time() - t0, 1)}), flush=True)
    if not a.skip_baseline:
        pol = HFPolicy(model, tok)
        print(json.dumps({"stage": "baseline", **score(pol, dev, a.max_steps)}), flush=True)

    ds = Dataset.from_list([{"prompt": r["prompt"], "completion": r["completion"]} for r in rows])
    cfg = SFTConfig(output_dir=str(out / "ckpt"), max_steps=a.steps, per_device_train_batch_size=a.bs,
                    learning_rate=a.lr, lr_scheduler_type="cosine", warmup_steps=max(1, a.steps // 20),
                    logging_steps=max(1, a.steps // 10), save_strategy="no", report_to="none", bf16=False,
                    gradient_checkpointing=False, use_cpu=True, dataloader_num_workers=0, max_length=a.positions,
                    seed=0, disable_tqdm=True)
    t0 = time.time()
    trainer = SFTTrainer(model=model, args=cfg, train_dataset=ds, processing_class=tok)
    trainer.train()
    logs = [{k: round(v, 4) for k, v in h.items() if k in ("step", "loss", "mean_token_accuracy")}
            for h in trainer.state.log_history if "loss" in h]
    print(json.dumps({"stage": "sft", "train_s": round(time.time() - t0, 1), "logs": logs}), flush=True)
    model = trainer.model
    model.save_pretrained(out / "model")
    tok.save_pretrained(out / "model")
    pol = HFPolicy(model, tok)
    print(json.dumps({"stage": "after_sft", **score(pol, dev, a.max_steps)}), flush=True)


if __name__ == "__main__":
    main()

"""Lean SFT on a CPU for the interactive tasks (WebShop, DeepSearchQA, ALFWorld under a ReAct text
protocol): one example per expert step (the grader's exact prompt -> the expert's action), a plain
PyTorch loop over a transformers model. Rows are chat (`prompt` messages, `completion` [the
assistant's message]) or text (`prompt` and `completion` strings: the text the grader completes
and what the model should write; plain LM loss, no chat template).

Why not TRL's SFTTrainer here: on 2 shared cores every token counts. This loop batches examples of
similar length (little padding), skips gradient checkpointing (the model is small enough to keep
its activations) and weighs the loss: every token of the prompt at `--prompt_weight` (predicting
the page is what teaches a model trained from scratch to copy from it: the instruction's words
into the query, the listed product id into the click, the option names into the option clicks),
the action's tokens at 1. Decision steps (WebShop's product and option clicks, which the shop's
pages hardly repeat) are repeated `--decisions` times. `--rename` (WebShop) gives a share of the
drawn examples fresh product ids, `--permute` (with `--catalog`) a share permuted attributes and
option values;
DeepSearchQA's renamed copies are made beforehand (dsqa_rename.py) and passed as more `--data`.

Prints one JSON line {"stage": "sft", ...} at the end; logs loss points to $METRICS_FILE."""
import argparse
import json
import math
import os
import random
import re
import time

from common import setup_threads


def load_rows(paths, decisions):
    """(prompt, completion) pairs: chat rows keep their message list, text rows (a plain-text
    protocol's `prompt` string and `completion` string) their text. Exits with a one-line message
    when a file is missing, holds a row of neither shape, or when there is nothing to train on."""
    out = []
    for path in paths:
        try:
            with open(path) as fh:
                lines = [(n, line) for n, line in enumerate(fh, 1) if line.strip()]
        except OSError as exc:
            raise SystemExit(f"lean_sft.py: cannot read {path}: {exc.strerror}") from None
        for n, line in lines:
            try:
                prompt, action = row_pair(json.loads(line))
            except (ValueError, KeyError, IndexError, TypeError):
                raise SystemExit(f"lean_sft.py: {path} line {n} is not a prompt/completion row "
                                 f"(chat messages or text): fix or remove it") from None
            copies = decisions if action.startswith("click[") and action != "click[buy now]" else 1
            out += [(prompt, action)] * copies
    if not out:
        raise SystemExit(f"lean_sft.py: no training examples in {', '.join(paths)}: "
                         "pass --data files holding prompt/completion rows")
    return out


def row_pair(row):
    """A row's (prompt, completion): (message list, the assistant's text) or (text, text)."""
    prompt, completion = row["prompt"], row["completion"]
    if isinstance(prompt, str) and isinstance(completion, str):
        return prompt, completion
    if isinstance(prompt, list) and all(isinstance(m["content"], str) for m in prompt):
        action = completion[0]["content"]
        if isinstance(action, str):
            return prompt, action
    raise ValueError("not a prompt/completion row")


PRODUCT_ID = re.compile(r"\bb0[a-z0-9]{2,8}\b")
ID_CHARS = "abcdefghjklmnpqrstuvwxyz0123456789"


def value_pools(catalog_path):
    """product type -> its pools of interchangeable phrases, from the shop's catalog.jsonl: the
    attributes, and each option group's values (bare numbers, such as shoe sizes, left out: digits
    also make up prices and counts)."""
    groups: dict = {}
    with open(catalog_path) as fh:
        for line in fh:
            if line.strip():
                p = json.loads(line)
                mine = groups.setdefault(p["name"], {"attributes": set()})
                mine["attributes"].update(p.get("attributes") or [])
                for group, values in (p.get("options") or {}).items():
                    mine.setdefault(f"option:{group}", set()).update(values)
    return {name: [sorted(v for v in pool if not v.isdigit()) for pool in pools.values()]
            for name, pools in groups.items()}


def _value_swap(text, pools, rng):
    """A function text -> text that applies one random permutation of each pool of the example's
    product type (the longest type name the instruction contains) to every whole-phrase occurrence,
    lower-case as the instruction, option lists, clicks and query write them and Title Case as the
    titles do. None when the example names no known type."""
    instruction = next((line for line in text.splitlines() if line.startswith("Instruction: ")), "")
    kind = max((name for name in pools if name in instruction), key=len, default=None)
    if kind is None:
        return None
    mapping = {}
    for pool in pools[kind]:
        shuffled = pool[:]
        rng.shuffle(shuffled)
        for old, new in zip(pool, shuffled):
            mapping.setdefault(old, new)
            mapping.setdefault(_title(old), _title(new))
    if not mapping:
        return None
    pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, sorted(mapping, key=len, reverse=True))) + r")(?![\w-])")
    return lambda t: pattern.sub(lambda m: mapping[m.group(1)], t)


def _title(phrase):
    return " ".join(w if w[:1].isdigit() else w[:1].upper() + w[1:] for w in phrase.split())


def renamed(row, rng, pools=None, ids=True):
    """The row with every product id replaced by a fresh random one (the same one wherever it occurs:
    listing, available actions, previous actions, the reply). The catalog is shared by all splits,
    so a model could learn the train targets' ids by heart; with ids it has never seen it must
    copy the one on the page, as it must on held-out instructions.

    With `pools` (value_pools), the product type's attributes and option values are permuted
    throughout the example (the instruction, titles, option lists, history and reply alike): a
    train split holds a few target products per type, so a model can learn which colour or size
    goes with a type instead of reading the one the instruction names; in a permuted example the
    named value can only be read off the instruction. `ids=False` leaves the ids as they are: the
    held-out pages list the shop's real ids, whose tokens a model only learns from examples that
    show them (renaming every example's ids left them untrained: the model clicked one id
    everywhere), while the values are common tokens in any permutation."""
    mapping = {}

    def sub(m):
        if m.group(0) not in mapping:
            mapping[m.group(0)] = "b0" + "".join(rng.choice(ID_CHARS) for _ in range(len(m.group(0)) - 2))
        return mapping[m.group(0)]

    prompt, action = row
    whole = prompt if isinstance(prompt, str) else "\n".join(msg["content"] for msg in prompt)
    swap = _value_swap(whole, pools, rng) if pools else None

    def new(text):
        text = PRODUCT_ID.sub(sub, text) if ids else text
        return swap(text) if swap else text

    if isinstance(prompt, str):
        return new(prompt), new(action)
    return [dict(msg, content=new(msg["content"])) for msg in prompt], new(action)


def encode_row(tok, row, max_len):
    """(input ids, per-token flags: 1 = the action's, 0 = the prompt's). A chat prompt is rendered
    by the tokenizer's chat template, a text prompt is taken as it is (a plain-text protocol's
    grader completes it verbatim); each is tokenized alone, as the grader tokenizes the prompt it
    completes. Cut from the left: the completion is always kept."""
    prompt, action = row
    text = prompt if isinstance(prompt, str) else tok.apply_chat_template(prompt, tokenize=False,
                                                                          add_generation_prompt=True)
    p_ids = tok(text, add_special_tokens=False)["input_ids"]
    a_ids = tok(action + tok.eos_token, add_special_tokens=False)["input_ids"]
    return (p_ids + a_ids)[-max_len:], ([0] * len(p_ids) + [1] * len(a_ids))[-max_len:]


def lr_factor(steps, started, stop_at, clock=time.time):
    """The learning rate's factor at step s: a linear warmup over the first 5 % of the steps, then a
    cosine to 0 over the training's progress, the larger of the steps' share done and (with
    `stop_at`) the time's share spent. With time to spare the steps set the pace, as a plain cosine;
    on a loaded machine, where `stop_at` comes before the last step, the rate is annealed by the
    clock and reaches 0 when training stops instead of being cut off near its peak."""
    warmup = max(1, steps // 20)

    def factor(s):
        progress = min(1.0, s / steps)
        if stop_at:
            progress = max(progress, min(1.0, (clock() - started) / max(1e-9, stop_at - started)))
        return min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * progress))
    return factor


def encode(tok, rows, max_len):
    return [encode_row(tok, row, max_len) for row in rows]


def batches(encoded, batch, rng):
    """Batches of similar length, in random order; reshuffled every epoch."""
    while True:
        order = sorted(range(len(encoded)), key=lambda i: (len(encoded[i][0]), rng.random()))
        chunks = [order[i:i + batch] for i in range(0, len(order), batch)]
        rng.shuffle(chunks)
        yield from chunks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", nargs="+", required=True, help="prompt/completion jsonl files")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--prompt_weight", type=float, default=0.2, help="loss weight of the prompt's tokens (0: action only)")
    ap.add_argument("--decisions", type=int, default=2, help="copies of each product/option click")
    ap.add_argument("--rename", type=float, default=0.0,
                    help="share of the drawn examples whose product ids are replaced by fresh ones")
    ap.add_argument("--catalog", default="",
                    help="the shop's catalog.jsonl, for --permute")
    ap.add_argument("--permute", type=float, default=0.0,
                    help="share of the drawn examples whose type's attributes and option values are permuted "
                         "(needs --catalog)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stop_at", type=float, default=0.0, help="epoch seconds: stop training and save")
    a = ap.parse_args()
    t0 = time.time()
    rows = load_rows(a.data, a.decisions)      # before anything slow: no examples fails at once
    setup_threads()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model)
    device = "cuda" if torch.cuda.is_available() else "cpu"     # the run's GPU when it has one
    model.to(device)
    max_len = int(getattr(model.config, "max_position_embeddings", 1024) or 1024)
    pools = value_pools(a.catalog) if a.catalog else None
    encoded = encode(tok, rows, max_len)
    pad = tok.pad_token_id
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.0, betas=(0.9, 0.98))
    t1 = time.time()
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor(a.steps, t1, a.stop_at))
    metrics_path = os.environ.get("METRICS_FILE", "logs/metrics.jsonl")
    os.makedirs(os.path.dirname(os.path.abspath(metrics_path)), exist_ok=True)
    model.train()
    step, stopped_early = 0, False
    window = []
    for idx in batches(encoded, a.batch, rng):
        if step >= a.steps:
            break
        if a.stop_at and time.time() >= a.stop_at:
            stopped_early = True
            break
        drawn = []
        for i in idx:
            fresh_ids = bool(a.rename) and rng.random() < a.rename
            permuted = pools is not None and rng.random() < a.permute
            drawn.append(encode_row(tok, renamed(rows[i], rng, pools if permuted else None, ids=fresh_ids), max_len)
                         if fresh_ids or permuted else encoded[i])
        width = max(len(seq) for seq, _ in drawn)
        ids = torch.full((len(idx), width), pad, dtype=torch.long)
        mask = torch.zeros((len(idx), width), dtype=torch.long)
        weight = torch.zeros((len(idx), width))
        for row, (seq, is_action) in enumerate(drawn):
            ids[row, :len(seq)] = torch.tensor(seq)
            mask[row, :len(seq)] = 1
            weight[row, :len(seq)] = torch.tensor([1.0 if x else a.prompt_weight for x in is_action])
        ids, mask, weight = ids.to(device), mask.to(device), weight.to(device)
        target, w = ids[:, 1:], weight[:, 1:]
        # The vocabulary projection is a third of this model's FLOPs per token: only the positions
        # in the loss go through it (all of them when the prompt is weighed, the actions' otherwise).
        hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state[:, :-1]
        keep = w > 0
        nll = torch.zeros_like(w)
        nll[keep] = torch.nn.functional.cross_entropy(model.lm_head(hidden[keep]), target[keep], reduction="none")
        loss = (nll * w).sum() / w.sum()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        action_w = (w == 1.0).float()
        window.append(((nll * action_w).sum() / action_w.sum().clamp(min=1)).item())
        if step % 10 == 0 or step == a.steps:
            point = {"loss": loss.item(), "action_loss": sum(window) / len(window), "learning_rate": sched.get_last_lr()[0]}
            window = []
            with open(metrics_path, "a") as fh:
                fh.write(json.dumps({"ts": time.time(), "step": step, "phase": "sft", "metrics": point}) + "\n")
            print(f"step {step}: loss={point['loss']:.4f} action_loss={point['action_loss']:.4f}", flush=True)
    train_s = time.time() - t1
    tmp = a.out.rstrip("/") + ".partial"
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    os.replace(tmp, a.out)
    print(json.dumps({"stage": "sft", "device": device, "examples": len(encoded), "steps": step, "stopped_early": stopped_early,
                      "train_s": round(train_s, 1), "s_per_step": round(train_s / max(step, 1), 3),
                      "total_s": round(time.time() - t0, 1), "out": a.out}), flush=True)


if __name__ == "__main__":
    main()

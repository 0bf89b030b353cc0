"""SFT for ALFWorld with TRL's SFTTrainer: one example per expert step, prompt = what the grader
sends at that step, completion = the expert's command.

`--full_loss 1` (the default) trains on every token, the prompt's too, not only on the command: an
ALFWorld prompt is ~400 tokens and the command ~5, so a loss on the command alone gets about 1%
of the tokens a step computes. Predicting the room list, the feedback and the available commands
is what teaches a model trained from scratch to look things up in its prompt (which object the
goal names, which receptacle comes next in the room's list), at no extra cost per step.

Data: the train split's sft_prompt_completion.jsonl plus any collected files (alfworld_collect.py).

`--rename K` adds K copies of every example with the object types renamed consistently (the apple
becomes a kettle in the goal, the room, the history, the commands and the answer). A small model
trained on a few dozen games otherwise memorizes which object each kind of room asks for; with
renamed copies the only way to get the answer right is to read the name from the prompt, which is
what the held-out games need. Object names come from the data itself (`take X N from`)."""
import argparse
import json
import os
import random
import re
import time

from common import save_full_model, setup_threads, trainer_device
from metrics_callback import MetricsFileCallback, StopAt


TAKE_RE = re.compile(r"\btake (\w+) \d+ from ")
MOVES = ("go to ", "open ")


def load_examples(paths, seed, rename=0, decisions=1):
    """The rows of the files: chat (`prompt` messages, `completion` [the reply]) or text (`prompt`
    and `completion` strings, AutoRL-Bench's ReAct protocol: TRL trains those as plain LM text).
    Exits with a one-line message when there is nothing to train on."""
    rows = []
    for path in paths:
        try:
            with open(path) as fh:
                rows += [json.loads(line) for line in fh if line.strip()]
        except (OSError, ValueError) as exc:
            raise SystemExit(f"alfworld_sft.py: cannot read {path} as JSON lines: {exc}") from None
    rows = [{"prompt": r["prompt"], "completion": r["completion"]} for r in rows
            if isinstance(r, dict) and "prompt" in r and "completion" in r]
    if not rows:
        raise SystemExit(f"alfworld_sft.py: no prompt/completion rows in {', '.join(paths)}: pass the SFT files")
    # most steps of a search are walking (go to / open); the few that act on an object decide the game
    rows += [r for r in rows if not reply(r).lstrip().startswith(MOVES)] * (decisions - 1)
    if rename:
        rng = random.Random(f"rename/{seed}")
        objects = sorted({o for r in rows for o in TAKE_RE.findall(last_user(r))})
        pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, objects), key=len, reverse=True)) + r")\b")
        rows += [renamed(r, objects, pattern, rng) for r in rows for _ in range(rename)]
    random.Random(seed).shuffle(rows)
    return rows


def reply(row):
    return row["completion"] if isinstance(row["completion"], str) else row["completion"][0]["content"]


def last_user(row):
    return row["prompt"] if isinstance(row["prompt"], str) else row["prompt"][-1]["content"]


def renamed(row, objects, pattern, rng):
    """The example with every object type of `objects` it mentions (found by `pattern`, one regex
    for all of them) mapped to another one of them."""
    user, answer = last_user(row), reply(row)
    present = sorted(set(pattern.findall(user + "\n" + answer)))
    others = [o for o in objects if o not in present]
    rng.shuffle(others)
    mapping = dict(zip(present, others))

    def sub(text):
        return pattern.sub(lambda m: mapping.get(m.group(1), m.group(1)), text)

    if isinstance(row["prompt"], str):
        return {"prompt": sub(user), "completion": sub(answer)}
    return {"prompt": row["prompt"][:-1] + [{"role": "user", "content": sub(user)}],
            "completion": [{"role": "assistant", "content": sub(answer)}]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", nargs="+", required=True, help="prompt/completion jsonl files")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--rename", type=int, default=1, help="renamed copies of each example (0: none)")
    ap.add_argument("--decisions", type=int, default=1,
                    help="copies of each step that is not a walk (take, move, heat, ...): weighs the decisions")
    ap.add_argument("--full_loss", type=int, default=1, help="1: loss on every token; 0: on the command only")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stop_at", type=float, default=0.0, help="epoch seconds: stop training and save")
    a = ap.parse_args()
    t0 = time.time()
    rows = load_examples(a.data, a.seed, a.rename, a.decisions)
    setup_threads()
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model)
    max_length = int(getattr(model.config, "max_position_embeddings", 1024) or 1024)
    device_args, device = trainer_device()
    cfg = SFTConfig(
        output_dir=os.path.join("logs", "sft_trainer"), max_steps=a.steps, per_device_train_batch_size=a.batch,
        learning_rate=a.lr, lr_scheduler_type="cosine", warmup_steps=max(1, a.steps // 20),
        logging_steps=max(1, a.steps // 40), save_strategy="no", report_to="none", dataloader_num_workers=0,
        max_length=min(max_length, 2048), seed=a.seed, disable_tqdm=True, **device_args,
        completion_only_loss=not a.full_loss)
    stop = StopAt(a.stop_at)
    trainer = SFTTrainer(model=model, args=cfg, train_dataset=Dataset.from_list(rows), processing_class=tok,
                         callbacks=[MetricsFileCallback("sft"), stop])
    t1 = time.time()
    trainer.train()
    train_s = time.time() - t1
    save_full_model(trainer, tok, a.out, 0)
    print(json.dumps({"stage": "sft", "device": device, "examples": len(rows),
                      "steps": trainer.state.global_step,
                      "stopped_early": stop.stopped_early, "train_s": round(train_s, 1),
                      "total_s": round(time.time() - t0, 1), "out": a.out}), flush=True)


if __name__ == "__main__":
    main()

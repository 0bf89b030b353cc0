"""Test agent: a few seconds of real supervised fine-tuning (plain PyTorch) on the train split's
gold solutions, two submissions, metrics logged through the metrics.jsonl convention."""

import json
import os
import time
import urllib.request

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

torch.set_num_threads(1)
torch.manual_seed(0)
ws = os.environ["WORKSPACE"]
os.makedirs(os.path.join(ws, "code"), exist_ok=True)
with open(os.path.join(ws, "code", "train.py"), "w") as fh:
    fh.write("# the training loop lives in the agent program; this file marks a code revision\nSTEPS = 30\n")
tok = AutoTokenizer.from_pretrained(os.environ["MODEL_PATH"])
model = AutoModelForCausalLM.from_pretrained(os.environ["MODEL_PATH"])
items = [json.loads(l) for l in open(os.path.join(os.environ["DATA_PATH"], "train.jsonl"))][:512]
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
metrics_file = os.environ["METRICS_FILE"]


def texts(batch):
    out = []
    for x in batch:
        msgs = [{"role": "user", "content": x["prompt"]}, {"role": "assistant", "content": x.get("solution") or
                                                             f"#### {x['answer']}"}]
        out.append(tok.apply_chat_template(msgs, tokenize=False))
    return out


def train(steps, start):
    model.train()
    for step in range(start, start + steps):
        batch = [items[(step * 16 + i) % len(items)] for i in range(16)]
        enc = tok(texts(batch), return_tensors="pt", padding=True)
        labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)
        loss = model(**enc, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        with open(metrics_file, "a") as fh:
            fh.write(json.dumps({"ts": time.time(), "step": step, "phase": "sft",
                                 "metrics": {"loss": loss.item(), "learning_rate": 3e-3}}) + "\n")
    return start + steps


def submit(name):
    model.save_pretrained(os.path.join(os.environ["OUTPUT_DIR"], name))
    tok.save_pretrained(os.path.join(os.environ["OUTPUT_DIR"], name))
    req = urllib.request.Request(os.environ["GRADING_SERVER_URL"] + "/submit", method="POST",
                                 data=json.dumps({"model_path": f"output/{name}"}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        print(f"{name}: {r.read().decode()}", flush=True)


step = train(int(os.environ.get("TRAIN_STEPS", "20")), 0)
submit("v1")
with open(os.path.join(ws, "code", "train.py"), "a") as fh:
    fh.write("STEPS_ROUND_2 = 30\n")
step = train(int(os.environ.get("TRAIN_STEPS", "20")), step)
submit("v2")

"""Test agent: trains the way AutoRL-Bench's agents do, the trainer's stdout and stderr merged
through a pipe (`TRAINER 2>&1 | tee logs/train.log`), and passes the merged bytes on unchanged, so
tqdm's `\\r` redraws and the log dicts share lines. Then submits the model.

`sft`: the stock `trl sft` command line (default logging, a checkpoint at its last step, whose
trainer_state.json is the trainer's own log_history). `grpo`: a TRL GRPO script in
example_agent's manner (`save_strategy="no"`, `report_to="none"`) that writes the trainer's
`log_history` to $WORKSPACE/log_history.json when done.

The time each log dict reached this agent through the pipe is written to
$WORKSPACE/print_times.jsonl (the tests measure how fast the harness stores what was printed)."""

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request

ws = os.environ["WORKSPACE"]
mode = sys.argv[1]
steps = os.environ.get("TRAIN_STEPS", "10")
data_dir = os.path.join(ws, "code", "train_data")
os.makedirs(data_dir, exist_ok=True)
os.makedirs(os.path.join(ws, "logs"), exist_ok=True)
with open(os.path.join(os.environ["DATA_PATH"], "train.jsonl")) as src, \
        open(os.path.join(data_dir, "train.jsonl"), "w") as dst:
    for line in list(src)[:200]:
        x = json.loads(line)
        answer = x.get("solution") or f"#### {x['answer']}"
        row = ({"messages": [{"role": "user", "content": x["prompt"]}, {"role": "assistant", "content": answer}]}
               if mode == "sft" else {"prompt": [{"role": "user", "content": x["prompt"]}], "answer": str(x["answer"])})
        dst.write(json.dumps(row) + "\n")

GRPO = r'''
import json, os, re, sys
from datasets import load_dataset
from trl import GRPOConfig, GRPOTrainer

def reward(completions, answer, **kw):
    out = []
    for c, gold in zip(completions, answer):
        m = re.search(r"####\s*(-?\d+)", c[0]["content"])
        out.append(1.0 if m and m.group(1) == gold else -1.0)
    return out

ds = load_dataset("json", data_files=sys.argv[1], split="train")
cfg = GRPOConfig(output_dir="output/grpo", max_steps=int(sys.argv[2]), per_device_train_batch_size=8,
                 num_generations=4, max_completion_length=16, logging_steps=1, save_strategy="no",
                 report_to="none", use_cpu=True, bf16=False, gradient_checkpointing=False, learning_rate=1e-5,
                 dataloader_num_workers=0)
trainer = GRPOTrainer(model=os.environ["MODEL_PATH"], reward_funcs=reward, args=cfg, train_dataset=ds)
trainer.train()
trainer.save_model("output/grpo")
json.dump(trainer.state.log_history, open(os.path.join(os.environ["WORKSPACE"], "log_history.json"), "w"))
'''

if mode == "sft":
    trl = shutil.which("trl") or os.path.join(os.path.dirname(sys.executable), "trl")
    trainer = [trl, "sft", "--model_name_or_path", os.environ["MODEL_PATH"], "--dataset_name", data_dir,
               "--output_dir", "output/sft", "--max_steps", steps, "--logging_steps", "1", "--save_steps", steps,
               "--per_device_train_batch_size", "4", "--use_cpu", "--dataloader_num_workers", "0"]
    model_out = "output/sft"
else:
    script = os.path.join(ws, "code", "grpo_train.py")
    with open(script, "w") as f:
        f.write(GRPO)
    trainer = [sys.executable, script, os.path.join(data_dir, "train.jsonl"), steps]
    model_out = "output/grpo"

stamps = open(os.path.join(ws, "print_times.jsonl"), "a")
pipeline = f"{shlex.join(trainer)} 2>&1 | tee logs/train.log"
print("running " + pipeline, flush=True)
proc = subprocess.Popen(["bash", "-o", "pipefail", "-c", pipeline], cwd=ws, stdout=subprocess.PIPE,
                        env=dict(os.environ, OMP_NUM_THREADS="1"))
pending = b""
while True:
    chunk = os.read(proc.stdout.fileno(), 65536)
    if not chunk:
        break
    seen = time.time()
    os.write(1, chunk)                   # the merged bytes, unchanged
    pending += chunk
    *lines, pending = pending.split(b"\n")
    for line in lines:
        text = line.decode("utf-8", "replace")
        if "'epoch'" in text:
            stamps.write(json.dumps({"t": seen, "line": text}) + "\n")
    stamps.flush()
if proc.wait() != 0:
    sys.exit(f"the trainer exited with {proc.returncode}")
req = urllib.request.Request(os.environ["GRADING_SERVER_URL"] + "/submit", method="POST",
                             data=json.dumps({"model_path": model_out}).encode(),
                             headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=600) as r:
    print(f"submitted {model_out}: {r.read().decode()}", flush=True)

"""Test agent: runs the real `trl sft` command line with its default logging on the task's train
split (converted to chat `messages`), then submits the model. Every stdout line of `trl sft` is
passed through unchanged, and the time each log-dict line was printed is written to
$WORKSPACE/print_times.jsonl (the tests measure how fast the harness stores what TRL prints).

Arguments: `--twice` runs a second `trl sft` into the same output folder (continuing from the
first's model); anything else is passed to `trl sft` (e.g. `--report_to tensorboard`)."""

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

ws = os.environ["WORKSPACE"]
twice = "--twice" in sys.argv[1:]
extra = [a for a in sys.argv[1:] if a != "--twice"]
data_dir = os.path.join(ws, "code", "sft_data")
os.makedirs(data_dir, exist_ok=True)
with open(os.path.join(os.environ["DATA_PATH"], "train.jsonl")) as src, \
        open(os.path.join(data_dir, "train.jsonl"), "w") as dst:
    for line in list(src)[:400]:
        x = json.loads(line)
        answer = x.get("solution") or f"#### {x['answer']}"
        dst.write(json.dumps({"messages": [{"role": "user", "content": x["prompt"]},
                                           {"role": "assistant", "content": answer}]}) + "\n")
trl = shutil.which("trl") or os.path.join(os.path.dirname(sys.executable), "trl")
stamps = open(os.path.join(ws, "print_times.jsonl"), "a")


def sft(model: str) -> None:
    cmd = [trl, "sft", "--model_name_or_path", model, "--dataset_name", data_dir, "--output_dir", "output/sft",
           "--max_steps", os.environ.get("SFT_STEPS", "12"), "--logging_steps", "1", "--save_steps", "5",
           "--per_device_train_batch_size", "4", "--use_cpu", "--dataloader_num_workers", "0", *extra]
    print("running " + " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, cwd=ws, stdout=subprocess.PIPE, text=True, bufsize=1,
                            env=dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1"))
    for line in proc.stdout:
        printed = time.time()
        sys.stdout.write(line)
        sys.stdout.flush()
        if line.startswith("{'"):
            stamps.write(json.dumps({"t": printed, "line": line.rstrip("\n")}) + "\n")
            stamps.flush()
    if proc.wait() != 0:
        sys.exit(f"trl sft exited with {proc.returncode}")


sft(os.environ["MODEL_PATH"])
if twice:
    sft(os.path.join(ws, "output", "sft"))
req = urllib.request.Request(os.environ["GRADING_SERVER_URL"] + "/submit", method="POST",
                             data=json.dumps({"model_path": "output/sft"}).encode(),
                             headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=600) as r:
    print(f"submitted output/sft: {r.read().decode()}", flush=True)

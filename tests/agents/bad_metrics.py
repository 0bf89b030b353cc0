"""Test agent, hostile to the metrics readers: $METRICS_FILE is a FIFO nobody writes, and a
trainer_state.json and a TensorBoard event file are links to /dev/zero. Then it submits the base
model unchanged (a valid submission) and exits."""

import json
import os
import shutil
import urllib.request

os.makedirs(os.path.dirname(os.environ["METRICS_FILE"]), exist_ok=True)
if os.path.exists(os.environ["METRICS_FILE"]):
    os.unlink(os.environ["METRICS_FILE"])
os.mkfifo(os.environ["METRICS_FILE"])
ckpt = os.path.join(os.environ["OUTPUT_DIR"], "run", "checkpoint-1")
os.makedirs(ckpt)
os.symlink("/dev/zero", os.path.join(ckpt, "trainer_state.json"))
os.symlink("/dev/zero", os.path.join(ckpt, "events.out.tfevents.1.host.1.0"))
shutil.copytree(os.environ["MODEL_PATH"], os.path.join(os.environ["OUTPUT_DIR"], "v1"))
req = urllib.request.Request(os.environ["GRADING_SERVER_URL"] + "/submit", method="POST",
                             data=json.dumps({"model_path": "output/v1"}).encode(),
                             headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=600) as r:
    print(f"submitted output/v1: {r.read().decode()}", flush=True)

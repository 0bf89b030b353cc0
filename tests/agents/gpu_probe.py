"""Test agent for the Ray executor: prints the devices it was given, ticks (stdout + metrics)
for a few seconds so that runs overlap, then submits the base model once."""

import json
import os
import shutil
import time
import urllib.request

api, out, model = os.environ["GRADING_SERVER_URL"], os.environ["OUTPUT_DIR"], os.environ["MODEL_PATH"]
print(f"devices {os.environ.get('CUDA_VISIBLE_DEVICES', '')}", flush=True)
for i in range(12):
    print(f"tick {i}", flush=True)
    with open(os.environ["METRICS_FILE"], "a") as fh:
        fh.write(json.dumps({"step": i, "metrics": {"tick": i}}) + "\n")
    time.sleep(0.5)
shutil.copytree(model, os.path.join(out, "v1"))
req = urllib.request.Request(f"{api}/submit", data=json.dumps({"model_path": "output/v1"}).encode(),
                             method="POST", headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=300) as r:
    print(f"submitted: {r.read().decode()}", flush=True)

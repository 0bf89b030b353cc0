"""Test agent for engine crash recovery: submission 1, numbered ticks (stdout + metrics) for
TICKS x 0.5 s, then submission 2 (same weights, a changed config so the content differs).
With HOLD_FILE set (a plan's agent_overlays passes it and binds its folder), it says `holding`
after tick 2 and goes on only once that file exists: a test acts on a run known to be mid-run."""

import json
import os
import shutil
import time
import urllib.request

api, out, model = os.environ["GRADING_SERVER_URL"], os.environ["OUTPUT_DIR"], os.environ["MODEL_PATH"]


def submit(name):
    req = urllib.request.Request(f"{api}/submit", data=json.dumps({"model_path": f"output/{name}"}).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    for attempt in range(60):   # the API may be briefly down while a new engine takes over
        try:
            with urllib.request.urlopen(req, timeout=300) as r:
                print(f"submitted {name}: {r.read().decode()}", flush=True)
                return
        except OSError as exc:
            print(f"submit {name} failed ({exc}); retrying", flush=True)
            time.sleep(1)


shutil.copytree(model, os.path.join(out, "v1"))
submit("v1")
for i in range(int(os.environ.get("TICKS", "40"))):
    print(f"tick {i}", flush=True)
    with open(os.environ["METRICS_FILE"], "a") as fh:
        fh.write(json.dumps({"step": i, "metrics": {"tick": i}}) + "\n")
    time.sleep(0.5)
    if i == 2 and os.environ.get("HOLD_FILE"):
        print("holding", flush=True)
        while not os.path.exists(os.environ["HOLD_FILE"]):
            time.sleep(0.1)
shutil.copytree(model, os.path.join(out, "v2"))
cfg = json.load(open(os.path.join(out, "v2", "config.json")))
cfg["autorl_probe"] = 2
json.dump(cfg, open(os.path.join(out, "v2", "config.json"), "w"))
submit("v2")

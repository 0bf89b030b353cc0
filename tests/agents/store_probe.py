"""Test agent: tries to read the files named in $STORE_PROBE (os.pathsep-separated: the engine's
store), records in logs/probe.json the first bytes it got or the error, then copies the base model
to output/v1 and submits it."""

import json
import os
import shutil

from grading_api import submit

ws = os.environ["WORKSPACE"]
seen = {}
for path in filter(None, os.environ.get("STORE_PROBE", "").split(os.pathsep)):
    try:
        with open(path, "rb") as fh:
            seen[path] = fh.read(16).decode("latin-1")
    except OSError as exc:
        seen[path] = f"error: {exc.strerror}"
print("probed:", seen, flush=True)
with open(os.path.join(ws, "logs", "probe.json"), "w") as fh:
    json.dump(seen, fh)
shutil.copytree(os.environ["MODEL_PATH"], os.path.join(ws, "output", "v1"))
status, answer = submit("output/v1")
print(f"submitted output/v1: {status} {answer}", flush=True)

"""Test agent for the harness's handling of hostile workspace files.

1. Submits a copy of the base model padded with a 3 GB sparse file (4 KB on disk).
2. Turns every workspace file the harness rewrites after a graded submission into a symlink to
   VICTIM (a harness-owned file outside the workspace; in a container only its host path is known,
   which is enough to attack a host-side write that follows links).
3. Submits a valid model. Records both answers in logs/hostile.json."""

import json
import os
import shutil

from grading_api import submit

ws = os.environ["WORKSPACE"]
out = os.environ["OUTPUT_DIR"]
victim = os.environ["VICTIM"]


shutil.copytree(os.environ["MODEL_PATH"], os.path.join(out, "sparse"))
with open(os.path.join(out, "sparse", "padding.bin"), "wb") as fh:
    fh.truncate(3 * 1024**3)
    fh.write(b"x" * 4096)
sparse = submit("output/sparse")

planted = []
for name in ("run_meta.json", "instructions.md", "prompt.md"):
    for link in (name, name + ".tmp"):
        path = os.path.join(ws, link)
        if os.path.lexists(path):
            os.unlink(path)          # the folder is the agent's: a read-only file in it can be removed
        os.symlink(victim, path)
        planted.append(link)
shutil.copytree(os.environ["MODEL_PATH"], os.path.join(out, "v1"))
valid = submit("output/v1")
with open(os.path.join(ws, "logs", "hostile.json"), "w") as fh:
    json.dump({"sparse": sparse, "planted": planted, "valid": valid}, fh)
print("submitted", valid)

"""Test agent for issue 31, breach 2: `output/` replaced by a link to `/`.

1. Saves output/v1 with its weights, a held-out split and the store as links to host files
   (VICTIM: a root-only file; SPLIT; STORE), then `mv output output.real; ln -s / output` and
   submits output/<its workspace path>/output.real/v1.
2. Submits host paths through the link, one that exists and one that does not (an oracle probe).
3. Restores output/ and submits another run's snapshot (OTHER_SNAPSHOT) through a link.
4. Submits a valid copy of the base model. Records every answer in logs/output_link.json."""

import json
import os
import shutil

from grading_api import submit

ws = os.environ["WORKSPACE"]
out = os.environ["OUTPUT_DIR"]


v1 = os.path.join(out, "v1")
shutil.copytree(os.environ["MODEL_PATH"], v1)
for name, target in (("model.safetensors", os.environ["VICTIM"]), ("test.jsonl", os.environ["SPLIT"]),
                     ("store.db", os.environ["STORE"])):
    path = os.path.join(v1, name)
    if os.path.lexists(path):
        os.unlink(path)
    os.symlink(target, path)
real = os.path.join(ws, "output.real")
os.rename(out, real)
os.symlink("/", out)
results = {"root": submit(f"output/{ws.lstrip('/')}/output.real/v1"),
           "oracle_present": submit("output/" + os.environ["VICTIM"].lstrip("/")),
           "oracle_absent": submit("output/" + os.environ["VICTIM"].lstrip("/") + ".absent")}
os.unlink(out)
os.rename(real, out)
os.symlink(os.environ["OTHER_SNAPSHOT"], os.path.join(out, "theirs"))
results["theirs"] = submit("output/theirs")
shutil.copytree(os.environ["MODEL_PATH"], os.path.join(out, "v2"))
results["valid"] = submit("output/v2")
with open(os.path.join(ws, "logs", "output_link.json"), "w") as fh:
    json.dump(results, fh)
print("submitted", results["valid"])

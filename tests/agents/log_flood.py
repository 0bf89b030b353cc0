"""Test agent: floods stdout with FLOOD_LINES short lines (default 6 M) as fast as Python can
write them, records how long that took in logs/flood.json, then submits a copy of the base model."""

import json
import os
import shutil
import time
import urllib.request

n = int(os.environ.get("FLOOD_LINES") or 6_000_000)
chunk = 20_000
out = os.fdopen(1, "wb", buffering=1 << 20, closefd=False)
t0 = time.time()
for start in range(0, n, chunk):
    out.write(b"".join(b"flood line %d\n" % i for i in range(start, min(n, start + chunk))))
out.flush()
elapsed = time.time() - t0
with open(os.path.join(os.environ["WORKSPACE"], "logs", "flood.json"), "w") as fh:
    json.dump({"lines": n, "started": t0, "seconds": elapsed}, fh)
shutil.copytree(os.environ["MODEL_PATH"], os.path.join(os.environ["OUTPUT_DIR"], "v1"))
req = urllib.request.Request(f"{os.environ['GRADING_SERVER_URL']}/submit", method="POST",
                             data=json.dumps({"model_path": "output/v1"}).encode(),
                             headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=300) as r:
    r.read()

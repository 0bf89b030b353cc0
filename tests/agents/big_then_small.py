"""Test agent: submits a big folder (the base model plus BIG_FILES small files and a BIG_MB sparse
file) and, as soon as the harness has begun copying it (the first of its files, in the order the
snapshot takes them, was read: its atime moved), a small one (a copy of the base model). Prints
each answer as `answer big|small: {json}` and whether the big copy's start was seen."""

import json
import os
import shutil
import threading
import time

from grading_api import submit

out = os.environ["OUTPUT_DIR"]
big, small = os.path.join(out, "big"), os.path.join(out, "small")
shutil.copytree(os.environ["MODEL_PATH"], big)
shutil.copytree(os.environ["MODEL_PATH"], small)
with open(os.path.join(small, "small.txt"), "w") as fh:
    fh.write("small\n")
first = None
for d in range(8):       # "000-filler" is listed, and copied, before config.json
    folder = os.path.join(big, "000-filler", f"{d:02d}")
    os.makedirs(folder)
    for i in range(int(os.environ.get("BIG_FILES") or 8000) // 8):
        path = os.path.join(folder, f"{i:05d}.bin")
        with open(path, "w") as fh:
            fh.write(f"{d} {i}\n")
        first = first or path
with open(os.path.join(big, "optimizer.bin"), "wb") as fh:    # sparse: costs the agent nothing to write
    fh.truncate(int(os.environ.get("BIG_MB") or 300) << 20)
time.sleep(0.05)                   # the atime set now is older than any read to come (relatime)
before = os.stat(first).st_atime_ns
answers = {}


def one(name: str) -> None:
    status, answer = submit(f"output/{name}")
    answers[name] = {**answer, "http": status}
    print(f"answer {name}: {json.dumps(answers[name])}", flush=True)


t = threading.Thread(target=one, args=("big",))
t.start()
end = time.monotonic() + 120
while os.stat(first).st_atime_ns == before and time.monotonic() < end:
    time.sleep(0.002)
print(f"big copy started: {os.stat(first).st_atime_ns != before}", flush=True)
one("small")
t.join()

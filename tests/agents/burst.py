"""Test agent: waits until the test drops `go` into its workspace (so that two runs submit at the
same moment), then submits BURST_N (3) distinct copies of the base model at once, one thread
each, and prints every answer as `answer N: {json}`."""

import json
import os
import shutil
import threading
import time

from grading_api import submit

ws = os.environ["WORKSPACE"]
n = int(os.environ.get("BURST_N") or 3)
for i in range(n):
    folder = os.path.join(os.environ["OUTPUT_DIR"], f"b{i}")
    shutil.copytree(os.environ["MODEL_PATH"], folder)
    with open(os.path.join(folder, "burst.txt"), "w") as fh:      # a distinct content: never a duplicate
        fh.write(f"copy {i}\n")
end = time.monotonic() + 300
while not os.path.exists(os.path.join(ws, "go")) and time.monotonic() < end:
    time.sleep(0.05)


def one(i: int) -> None:
    status, answer = submit(f"output/b{i}")
    print(f"answer {i}: {json.dumps({**answer, 'http': status})}", flush=True)


threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
for t in threads:
    t.start()
    time.sleep(0.02)          # in this order: b0 before b1 before b2
for t in threads:
    t.join()

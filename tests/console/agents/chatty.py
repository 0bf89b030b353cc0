"""Console test agent: prints numbered lines and appends training metrics to $METRICS_FILE,
then sleeps (until the harness cancels it or its budget runs out).

CHATTY_LINES (default 20) lines, CHATTY_INTERVAL seconds apart (default 0.05)."""

import json
import os
import sys
import time

lines = int(os.environ.get("CHATTY_LINES", "20"))
interval = float(os.environ.get("CHATTY_INTERVAL", "0.05"))
metrics = os.environ.get("METRICS_FILE")
for i in range(lines):
    print(f"chatty line {i}", flush=True)
    if metrics and i % 5 == 0:
        with open(metrics, "a") as f:
            f.write(json.dumps({"ts": time.time(), "step": i, "phase": "train",
                                "metrics": {"loss": 1.0 / (i + 1), "reward": i / lines}}) + "\n")
    time.sleep(interval)
print("chatty idle", file=sys.stderr, flush=True)
while True:
    time.sleep(1)

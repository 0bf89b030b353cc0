"""After the gpu-demo plan ran in HOME (scripts/gpu-check.sh, stage demo): assert from the store
that the run trained and graded on CUDA. Reads the store (HOME/store.db, or where HOME/store.location
says) with the standard library only.

    python3 scripts/gpu_demo_assert.py HOME

Checks: the run finished; every grading that ended (baselines, submissions, the held-out test)
records a placement whose device_used is cuda:N; the reference agent's training stages (its
`{"stage": ..., "device": ...}` lines on stdout) ran on cuda; with GPU_DEMO_SANDBOXED=1 (the check
found bubblewrap), the agent ran in the sandbox (its recorded isolation is `bwrap`, not `none`).
Prints what it found; exit 0 when all hold, 1 otherwise, 2 when HOME has no store or run."""

import json
import os
import sqlite3
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python3 scripts/gpu_demo_assert.py HOME", file=sys.stderr)
        return 2
    record = Path(argv[0]) / "store.location"        # a store kept on local disk (--store; docs/cluster.md)
    db = Path(json.loads(record.read_text())["store"]) if record.is_file() else Path(argv[0]) / "store.db"
    if not db.is_file():
        print(f"gpu_demo_assert: no store at {db}", file=sys.stderr)
        return 2
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    runs = con.execute("SELECT id, state, gpus_requested, spec FROM runs ORDER BY created_at").fetchall()
    if not runs:
        print("gpu_demo_assert: the store holds no run", file=sys.stderr)
        return 2
    failures = []
    sandboxed = os.environ.get("GPU_DEMO_SANDBOXED") == "1"
    for run_id, state, gpus, spec in runs:
        isolation = (json.loads(spec or "{}") or {}).get("isolation")
        print(f"run {run_id}: state {state}, gpus requested {gpus}, agent isolation {isolation}")
        if state != "done":
            failures.append(f"{run_id} ended {state}")
        if sandboxed and isolation != "bwrap":
            failures.append(f"{run_id}: the agent ran with isolation {isolation}, not in the sandbox (bwrap)")
        ends = [(m, json.loads(d or "{}")) for m, d in con.execute(
            "SELECT message, data FROM events WHERE run_id = ? AND kind = 'grading' ORDER BY id", (run_id,))]
        ends = [(m, d) for m, d in ends if d.get("phase") == "end"]
        if not ends:
            failures.append(f"{run_id}: no grading ended")
        for message, data in ends:
            place = data.get("placement") or {}
            used = str(place.get("device_used"))
            print(f"  grading: {message} | backend {place.get('backend')} on {used} ({place.get('gpu_name')}); "
                  f"{place.get('reason')}" + (f"; FALLBACK {place['fallback']}" if place.get("fallback") else ""))
            if not used.startswith("cuda"):
                failures.append(f"{run_id}: grading '{message}' ran on {used}")
        stages = []
        for (message,) in con.execute("SELECT message FROM events WHERE run_id = ? AND kind = 'stdout' "
                                      "AND message LIKE '%\"stage\"%' ORDER BY id", (run_id,)):
            try:
                line = json.loads(message[message.index("{"):])
            except ValueError:
                continue
            if isinstance(line, dict) and "device" in line:
                stages.append(line)
                print(f"  training: {line.get('stage')} on {line['device']}: {line.get('steps')} steps in "
                      f"{line.get('train_s')} s")
        if not stages:
            failures.append(f"{run_id}: no training stage reported its device")
        failures += [f"{run_id}: {s.get('stage')} trained on {s['device']}" for s in stages
                     if not str(s["device"]).startswith("cuda")]
    for f in failures:
        print(f"FAIL {f}")
    print("gpu-demo: trained and graded on cuda" if not failures else f"gpu-demo: {len(failures)} check(s) failed")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Calibrate the reference agent on `arith` with the tiny model, through the real engine.

One plan (a run per seed, one at a time) run headless with `--batch` in a fresh home under OUT: the
engine's own workspace, per-run grading API and sandboxed grader worker, baseline on dev and test,
held-out test of the selected submission. Then, per seed, a JSON line from `export`: baseline,
each submission's dev score, the selection, its test score, the gain and the run's time from its
start to its end (export's agent_time_s).

usage: PYTHONPATH=. python scripts/calibrate_reference.py OUT [--seeds 0 1 2] [--budget 300] [opt=value ...]
(opt=value: the reference agent's options, passed as REFERENCE_AGENT_OPTIONS)
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def cli(home: Path, *args: str, env: dict | None = None, capture: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autorl_tui", "--home", str(home), *args], cwd=REPO, text=True,
                          capture_output=capture, env=dict(os.environ, PYTHONPATH=str(REPO), **(env or {})))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--budget", type=float, default=300)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("options", nargs="*", help="reference agent options key=value")
    a = ap.parse_intermixed_args()
    out = Path(a.out).resolve()
    home = out / "home"
    out.mkdir(parents=True, exist_ok=True)
    plan = out / "calibration-plan.yaml"
    plan.write_text(yaml.safe_dump({"name": "calibrate-reference", "tasks": ["arith"], "agents": ["reference"],
                                    "models": ["tiny"], "seeds": a.seeds, "budget": f"{a.budget:g}s",
                                    "executor": "local", "threads": a.threads}))
    batch = cli(home, "--plain", "--concurrency", "1", "--batch", str(plan), capture=False,
                env={"REFERENCE_AGENT_OPTIONS": ",".join(a.options)})
    listed = cli(home, "runs", "list", "--json", "--plan", "calibrate-reference")
    if listed.returncode != 0:
        sys.exit(f"calibration: the batch exited {batch.returncode} and left no runs to read:\n{listed.stderr}")
    rows = []
    for run in sorted(json.loads(listed.stdout), key=lambda r: r["id"]):
        export = cli(home, "export", run["id"], "--json", "-", "--no-events", "--no-samples")
        r = json.loads(export.stdout)
        subs = r["submissions"]
        selected = next((s for s in subs if s["test_score"] is not None), None)
        row = {"seed": r["seed"], "state": r["state"], "baseline_dev": r["baseline_dev_score"],
               "baseline_test": r["baseline_score"], "dev": {s["path"]: s["score"] for s in subs},
               "selected": selected and selected["path"], "test": r["test_score"],
               "improvement_test": r["improvement"], "agent_time_s": r["agent_time_s"] and round(r["agent_time_s"], 1),
               "load_avg": os.getloadavg()[0]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    (out / "calibration.json").write_text(json.dumps(rows, indent=1))
    return 0 if batch.returncode == 0 else batch.returncode


if __name__ == "__main__":
    sys.exit(main())

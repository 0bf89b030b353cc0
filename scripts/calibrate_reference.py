"""Calibrate the reference agent on `arith` with the tiny model, without the engine.

For each seed: a hand-laid workspace, the stand-in grading API (tests/standin_grading.py, real
grader worker on dev), the agent run as a subprocess with only the workspace environment; then the
best submission graded on the held-out test split. Prints baseline, per-submission dev, test, wall.

usage: PYTHONPATH=. python scripts/calibrate_reference.py OUT [--seeds 0 1 2] [--budget 300] [opt=value ...]
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autorl_tui.catalog.agents import builtin_agents_dir  # noqa: E402
from autorl_tui.catalog.tasks import find_task, materialize, task_search_path  # noqa: E402
from autorl_tui.tasks.arith.tiny_model import build_tiny_model  # noqa: E402
from tests.standin_grading import StandinGradingServer, grade, make_workspace  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--budget", type=float, default=300)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("options", nargs="*", help="reference agent options key=value")
    a = ap.parse_args()
    out = Path(a.out).resolve()
    card = find_task("arith", task_search_path())
    cache = out / "cache"
    model = build_tiny_model(out / "models" / "tiny", seed=0)
    dev, test = materialize(card, "dev", cache), materialize(card, "test", cache)
    base_dev = grade(card, dev, model, out / "grading", threads=a.threads)["score"]
    base_test = grade(card, test, model, out / "grading", "test", threads=a.threads)["score"]
    print(json.dumps({"baseline_dev": base_dev, "baseline_test": base_test}), flush=True)
    rows = []
    for seed in a.seeds:
        ws = out / f"ws-seed{seed}"
        env = make_workspace(ws, card, model, cache, a.budget, seed=seed)
        deadline = float(env["RUN_DEADLINE"])
        with StandinGradingServer(ws, card, dev, out / "grading", deadline, base_dev, threads=a.threads) as srv:
            env["GRADING_SERVER_URL"] = srv.url
            t0 = time.time()
            proc = subprocess.run([sys.executable, str(builtin_agents_dir() / "reference" / "agent.py"), *a.options],
                                  cwd=ws, env=env, stdout=open(ws / "agent.log", "w"), stderr=subprocess.STDOUT)
            wall = time.time() - t0
            subs = list(srv.submissions)
        done = [json.loads(line.split("done: ", 1)[1]) for line in (ws / "agent.log").read_text().splitlines()
                if line.startswith("[reference] done: ")]
        best = max(subs, key=lambda s: s["score"]) if subs else None
        test_score = grade(card, test, ws / best["model_path"], out / "grading", "test",
                           threads=a.threads)["score"] if best else None
        row = {"seed": seed, "exit": proc.returncode, "baseline_dev": base_dev, "baseline_test": base_test,
               "dev": {s["model_path"]: s["score"] for s in subs}, "selected": best and best["model_path"],
               "test": test_score, "improvement_test": None if test_score is None else round(test_score - base_test, 2),
               "agent_wall_s": round(wall, 1), "within_budget": wall <= a.budget,
               "training_cpu_s": done[0]["training_cpu_s"] if done else None, "load_avg": os.getloadavg()[0]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    (out / "calibration.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

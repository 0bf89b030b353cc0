"""Grading figures on this machine: the real grader worker subprocess grading the tiny model on
the arith dev split (200 problems).

- grading_overhead_per_submission: wall time of a worker run minus its inference time (process
  start, imports, model load, scoring, result writing);
- inference throughput (problems/s and generated tokens/s, greedy, batched).
"""
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autorl_tui.catalog.tasks import find_task, materialize, task_search_path  # noqa: E402
from autorl_tui.tasks.arith.tiny_model import build_tiny_model, source_key  # noqa: E402

THREADS = int(os.environ.get("BENCH_THREADS", "2"))
RUNS = int(os.environ.get("BENCH_RUNS", "2"))


def main():
    cache = Path(os.environ.get("AUTORL_TEST_CACHE", REPO / ".pytest_cache" / "autorl-models"))
    model = build_tiny_model(cache / f"tiny-{source_key()}", seed=0)   # shared with the tests' cache
    card = find_task("arith", task_search_path())
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        dev = materialize(card, "dev", tmp / "cache")
        walls, results = [], []
        for i in range(RUNS):
            req, res = tmp / f"req{i}.json", tmp / f"res{i}.json"
            req.write_text(json.dumps({"task": card.to_dict(), "split": "dev", "split_path": str(dev),
                                       "model_path": str(model), "protocol": card.protocol.to_dict(),
                                       "scorer": card.scorer, "backend": "transformers", "device": "cpu",
                                       "threads": THREADS, "seed": 0, "scratch_dir": str(tmp / "scratch")}))
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "autorl_tui.grading.worker", str(req), str(res)], cwd=REPO,
                           check=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
            walls.append(time.perf_counter() - t0)
            results.append(json.loads(res.read_text()))
    best = min(range(RUNS), key=lambda i: walls[i])
    r, wall = results[best], walls[best]
    t = r["timings"]
    n = r["metrics"]["n"]
    tokens = n * r["metrics"]["mean_tokens"]
    print(f"grading_overhead_per_submission: {wall - t['inference_s']:.2f} s")
    print(f"grading_overhead_in_worker: {t['total_s'] - t['inference_s']:.2f} s")
    print(f"grading_model_load: {t['load_s']:.2f} s")
    print(f"grading_scoring: {t['scoring_s'] * 1000:.1f} ms")
    print(f"grading_wall_per_submission: {wall:.2f} s")
    print(f"inference_throughput: {n / t['inference_s']:.1f} problems/s")
    print(f"inference_token_throughput: {tokens / t['inference_s']:.0f} tokens/s")
    print(f"(tiny model, arith dev n={n}, {THREADS} threads, best of {RUNS}; baseline score {r['score']:.1f})")


if __name__ == "__main__":
    main()

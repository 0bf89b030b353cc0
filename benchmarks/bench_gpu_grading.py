"""Grading on a GPU (issue 35): grading wall time per submission against raw batched inference on
the same GPU, transformers backend, the tiny model on arith dev (200) and test (400). Each side as
in benchmarks/bench_grading.py (its functions, with BENCH_DEVICE=cuda and the grading pinned to
BENCH_GPUS, default 0): the grading as the engine runs it (run_grader: sandboxed and warm where
the host can sandbox; each grading's child starts its own CUDA context), the raw side in this
process with the model loaded on the GPU and warmed up. BENCH_RUNS pairs per split (default 5),
alternating order. Prints a line per grading as it ends (so a run cut short shows where it was),
then a table; BENCH_JSON=FILE also writes the figures as JSON. BENCH_BUDGET_S=S: no grading starts
after S seconds, except dev's first grading and first pair (the runs measured so far make the
table, marked "cut at the budget").
Each pair also grades on a second warm server started with AUTORL_GRADER_CUDA_WARMUP=0 (its
spare children do not open CUDA before their job), so the CUDA warm-up's gain is measured side by
side ("no CUDA warm-up" columns; BENCH_CUDA_AB=0 leaves that side out).
BENCH_DEVICE=cpu BENCH_GPUS= runs the same on the CPU (a dry run of the script). Without a CUDA
device it says so and is skipped (exit 0: `make bench` on a CPU machine), unless
BENCH_GPU_REQUIRED=1 (scripts/gpu-check.sh), which makes that exit 3.

    BENCH_RUNS=5 PYTHONPATH=$PWD python3 benchmarks/bench_gpu_grading.py
"""
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("BENCH_DEVICE", "cuda")
os.environ.setdefault("BENCH_GPUS", "0")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_grading as bg  # noqa: E402


T0 = time.monotonic()
BUDGET_S = float(os.environ.get("BENCH_BUDGET_S") or "inf")
CUDA_AB = os.environ.get("BENCH_CUDA_AB", "1") == "1"
WARMUP_VAR = "AUTORL_GRADER_CUDA_WARMUP"


def grade(label: str, req: dict, work: Path):
    """bg.grade, with a line as it ends: which grading, its wall, where it ran, the time so far."""
    wall, outcome = bg.grade(req, work)
    bg.say(f"graded {label}: {wall:.2f} s on {(outcome.placement or {}).get('device_used')}, score {outcome.score:.2f} "
           f"(bench at {time.monotonic() - T0:.0f} s)")
    return wall, outcome


def grade_without_cuda_warmup(label: str, req: dict, work: Path):
    """The same grading on the other server (its own folder of gradings, so its own server), whose
    spare children were told not to open CUDA ahead of their job (the setting is read when a
    server starts)."""
    before = os.environ.get(WARMUP_VAR)
    os.environ[WARMUP_VAR] = "0"
    try:
        return grade(label + " (no CUDA warm-up)", req, work)
    finally:
        if before is None:
            os.environ.pop(WARMUP_VAR, None)
        else:
            os.environ[WARMUP_VAR] = before


def over_budget() -> bool:
    return time.monotonic() - T0 > BUDGET_S


def main() -> int:
    import torch

    os.environ.setdefault(WARMUP_VAR, "1")

    from autorl_tui.grading_host import grader_service
    from autorl_tui.isolation.sandbox_bwrap import probe

    if bg.DEVICE == "cuda" and not torch.cuda.is_available():
        required = os.environ.get("BENCH_GPU_REQUIRED") == "1"
        print(f"bench_gpu_grading: no CUDA device here (torch.cuda.is_available() is False); nothing measured"
              f"{'' if required else ' (skipped)'}")
        return 3 if required else 0
    cache = Path(os.environ.get("AUTORL_TEST_CACHE", bg.REPO / ".pytest_cache" / "autorl-models"))
    model = bg.build_tiny_model(cache / f"tiny-{bg.source_key()}", seed=0)
    card = bg.find_task("arith", bg.task_search_path())
    sandboxed, why = probe()
    gpu = torch.cuda.get_device_name(0) if bg.DEVICE == "cuda" else "none (BENCH_DEVICE=cpu: a dry run)"
    bg.say(f"(GPU {gpu}, GPUs {bg.GPUS}; tiny model, batch {card.protocol.batch_size}, max_tokens "
           f"{card.protocol.max_tokens}, {bg.THREADS} threads, median of {bg.RUNS}; "
           f"{'sandboxed, warm grader: ' + why if sandboxed else 'NOT sandboxed, cold path: ' + why})")
    base = Path(tempfile.mkdtemp(prefix="bench-gpu-grading-", dir="/tmp"))
    os.chmod(base, 0o711)
    rows = []
    cut = False
    try:
        os.environ[grader_service.DISABLE_ENV] = "1"
        for split in ("dev", "test"):
            path = bg.materialize(card, split, base / "cache")
            items = bg.read_items(path)
            if over_budget() and rows:     # the dev row is always measured (one pair at least)
                cut = True
                break
            first, first_outcome = grade(f"{split} first", bg.request(card, split, path, model),
                                         base / "gradings" / f"{split}-first")
            if CUDA_AB:       # the other server's start, off the measured pairs
                grade_without_cuda_warmup(f"{split} first", bg.request(card, split, path, model),
                                          base / "gradings-nowarm" / f"{split}-first")
            raw_once = bg.raw_inference(card, items, model, bg.THREADS, device=bg.DEVICE)
            walls, raws, outcomes, cold_walls, cold_outcomes = [], [], [], [], []
            sides = ["grade", "raw"] + (["nowarm"] if CUDA_AB else [])
            for i in range(bg.RUNS):
                if over_budget() and raws:
                    cut = True
                    break
                for side in sides[i % len(sides):] + sides[:i % len(sides)]:
                    time.sleep(bg.SETTLE_S)
                    if side == "raw":
                        raws.append(raw_once())
                        bg.say(f"raw inference {split} run {i + 1}: {raws[-1]:.2f} s")
                    elif side == "nowarm":
                        wall, outcome = grade_without_cuda_warmup(f"{split} run {i + 1}",
                                                                  bg.request(card, split, path, model),
                                                                  base / "gradings-nowarm" / f"{split}{i}")
                        cold_walls.append(wall)
                        cold_outcomes.append(outcome)
                    else:
                        wall, outcome = grade(f"{split} run {i + 1}", bg.request(card, split, path, model),
                                              base / "gradings" / f"{split}{i}")
                        walls.append(wall)
                        outcomes.append(outcome)
            mid = outcomes[walls.index(sorted(walls)[len(walls) // 2])]
            rows.append({"split": split, "n": len(items), "raw_s": statistics.median(raws),
                         "grading_s": statistics.median(walls),
                         "ratio": statistics.median(w / r for w, r in zip(walls, raws)),
                         "child_load_s": mid.timings.get("load_s"), "child_inference_s": mid.timings.get("inference_s"),
                         "first_grading_s": first, "score": mid.score,
                         "device_used": (mid.placement or {}).get("device_used"),
                         "phases_ms": {k: round(v * 1000) for k, v in mid.phases.items()}})
            if cold_walls:
                n = min(len(cold_walls), len(raws))
                cmid = cold_outcomes[cold_walls.index(sorted(cold_walls)[len(cold_walls) // 2])]
                rows[-1].update({"nowarm_grading_s": statistics.median(cold_walls),
                                 "nowarm_ratio": statistics.median(w / r for w, r in zip(cold_walls[:n], raws[:n])),
                                 "nowarm_child_load_s": cmid.timings.get("load_s"),
                                 "nowarm_child_inference_s": cmid.timings.get("inference_s")})
            del raw_once
            if bg.DEVICE == "cuda":
                torch.cuda.empty_cache()
        cold = cold_outcome = None
        if not over_budget():
            os.environ[grader_service.DISABLE_ENV] = "0"
            dev = bg.materialize(card, "dev", base / "cache")
            cold, cold_outcome = grade("dev cold path", bg.request(card, "dev", dev, model), base / "cold" / "c0")
        else:
            cut = True
    finally:
        grader_service.close_all()
        shutil.rmtree(base, ignore_errors=True)
    bg.say("| split | n | raw inference (s) | grading wall (s) | ratio | in child: load / inference (s) "
           "| first grading (s) | score | device |")
    bg.say("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "nowarm_grading_s" in r:
            bg.say(f"| {r['split']}, no CUDA warm-up | {r['n']} | {r['raw_s']:.3f} | {r['nowarm_grading_s']:.3f} | "
                   f"{r['nowarm_ratio']:.2f} | {r['nowarm_child_load_s']:.3f} / {r['nowarm_child_inference_s']:.3f} "
                   f"| | | |")
        bg.say(f"| {r['split']} | {r['n']} | {r['raw_s']:.3f} | {r['grading_s']:.3f} | {r['ratio']:.2f} | "
               f"{r['child_load_s']:.3f} / {r['child_inference_s']:.3f} | {r['first_grading_s']:.2f} | "
               f"{r['score']:.2f} | {r['device_used']} |")
    if cold is not None:
        bg.say(f"cold path (one worker process) on dev: {cold:.2f} s, device {(cold_outcome.placement or {}).get('device_used')}")
    if cut:
        bg.say(f"cut at the budget (BENCH_BUDGET_S={BUDGET_S:g}): fewer runs than BENCH_RUNS={bg.RUNS}, or a split or the cold path left out")
    for r in rows:
        bg.say(f"phases_ms {r['split']}: " + " ".join(f"{k}={v}" for k, v in r["phases_ms"].items()))
    if os.environ.get("BENCH_JSON"):
        Path(os.environ["BENCH_JSON"]).write_text(json.dumps({"gpu": gpu, "sandboxed": sandboxed, "rows": rows,
                                                              "cold_dev_s": cold, "cut_at_budget": cut}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

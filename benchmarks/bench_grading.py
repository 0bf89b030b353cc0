"""Grading at the speed of inference (issue 18), from one run on this machine: the tiny model on
the arith dev split (200 problems), as the engine grades it (grading_host/grading_client.run_grader:
sandboxed when the host can, through the warm grader unless AUTORL_WARM_GRADER=0).

- raw_inference_same_split: `policy.generate` over the split in this process, model loaded and
  warmed up, same batch size, max tokens, threads and sampling as the protocol (median);
- grading_wall_per_submission: one warm grading, request to outcome (median of BENCH_RUNS after
  a first grading that starts the server), and grading_wall_over_inference, the ratio: the median
  of the runs' ratios, each run a grading and a raw inference side by side (the order alternates,
  and each waits BENCH_SETTLE_S first: 0 on the CPU, back to back, since on this VM a warm process's
  generation that starts after ~0.3 s idle runs ~1.5x slower and a settle gave that penalty to the
  raw side alone (docs/grading.md, "The paired ratio measured fairly"); 1 s on a GPU, where the
  spare's CUDA warm-up takes that long and the GPU figures were taken so);
- grading_phases_ms: where a warm grading's wall time goes, per phase (median over the runs; the
  stamps of grading_host/grading_client.PHASES), and grading_fixed_cost, its wall time less inference;
- grading_wall_cold_per_submission: a fresh worker process (the former path), once;
- snapshot_s_per_gb_fresh / _unchanged: grading_host/submissions.snapshot_folder of a 256 MiB folder
  into a run's snapshots, first time (hash + copy into the blob store) and resubmitted unchanged
  (stat matches the record: links only); files in the page cache, as the agent just wrote them;
- preparing_fresh_home_s: a fresh home's preparing phase as the engine runs it: the run's grading
  server started ahead, the tiny model built in an empty folder (BENCH_BUILD=0 leaves that out:
  slow on a loaded machine; the server's start then overlaps nothing), the baselines on dev and
  test (preparing_fresh_home_baselines_s); against its budget, the build plus a warm grading of
  dev and one of test.
"""
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
THREADS = int(os.environ.get("BENCH_THREADS", "2"))
# The in-process inference gets the worker's threading environment (grading_host/grading_client.py sets
# it for every grading): without GOMP_SPINCOUNT, OpenMP threads spin and a loaded machine slows it.
os.environ.update({"OMP_NUM_THREADS": str(THREADS), "MKL_NUM_THREADS": str(THREADS), "GOMP_SPINCOUNT": "1000",
                   "TOKENIZERS_PARALLELISM": "false"})
from autorl_tui.catalog.tasks import find_task, materialize, read_items, task_search_path  # noqa: E402
from autorl_tui.tasks.arith.tiny_model import build_tiny_model, source_key  # noqa: E402
from benchmarks._raw_inference import phase_medians_ms, raw_inference  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "5"))
# benchmarks/bench_gpu_grading.py sets these: both sides on the same GPU (the grading pinned to it).
DEVICE = os.environ.get("BENCH_DEVICE", "cpu")
GPUS = [g for g in os.environ.get("BENCH_GPUS", "").split(",") if g]
SETTLE_S = float(os.environ.get("BENCH_SETTLE_S", "0" if DEVICE == "cpu" else "1.0"))
SNAPSHOT_MB = int(os.environ.get("BENCH_SNAPSHOT_MB", "256"))


def request(card, split: str, split_path: Path, model: Path) -> dict:
    return {"task": card.to_dict(), "split": split, "split_path": str(split_path), "model_path": str(model),
            "protocol": card.protocol.to_dict(), "scorer": card.scorer, "scorer_options": {},
            "backend": "transformers", "device": DEVICE, "threads": THREADS, "seed": card.protocol.seed,
            "placement": {"devices": GPUS}}


def grade(req: dict, work: Path):
    from autorl_tui.grading_host.grading_client import run_grader

    t0 = time.perf_counter()
    outcome = asyncio.run(run_grader(req, work, gpus=GPUS, threads=THREADS, timeout_s=1800))
    if not outcome.ok:
        raise SystemExit(f"grading failed: {outcome.error}")
    return time.perf_counter() - t0, outcome


def snapshot_figures(tmp: Path) -> tuple[float, float]:
    from autorl_tui.grading_host.submissions import snapshot_folder

    src = tmp / "out" / "v1"
    src.mkdir(parents=True)
    (src / "config.json").write_text("{}")
    chunk = os.urandom(1 << 20)
    with open(src / "model.safetensors", "wb") as fh:
        for i in range(SNAPSHOT_MB):
            fh.write(chunk[:-8] + i.to_bytes(8, "little"))
    gb = SNAPSHOT_MB / 1024
    # As an agent does: the checkpoint is saved, then submitted. A file changed within RACY_NS of
    # its hashing is always hashed again, so let the just-written file age past that first.
    from autorl_tui.grading_host.submissions import RACY_NS

    while time.time_ns() - (src / "model.safetensors").stat().st_ctime_ns <= RACY_NS:
        time.sleep(0.1)
    snaps = tmp / "snapshots" / "r1"
    t0 = time.perf_counter()
    snapshot_folder(src, snaps / "001", 1 << 40)
    fresh = time.perf_counter() - t0
    t0 = time.perf_counter()
    snapshot_folder(src, snaps / "002", 1 << 40)
    unchanged = time.perf_counter() - t0
    return fresh / gb, unchanged / gb


def preparing(card, dev: Path, test: Path, model: Path, home: Path, two_warm: float) -> None:
    """A fresh home's preparing phase as the engine runs it: the run's warm grader started ahead
    (RunGrading.prestart), the base model built (BENCH_BUILD=1), the baselines on dev and test.
    two_warm: a warm grading of dev plus one of test (twice as many problems)."""
    from autorl_tui.grading_host.grading_client import prestart_warm

    t0 = time.perf_counter()
    prestart_warm(request(card, "dev", dev, model), home / "grading" / "baseline-dev", threads=THREADS)
    built = 0.0
    if os.environ.get("BENCH_BUILD", "1") != "0":
        model = build_tiny_model(home / "models" / "tiny", seed=0)
        built = time.perf_counter() - t0
    t1 = time.perf_counter()
    for split, path in (("dev", dev), ("test", test)):
        grade(request(card, split, path, model), home / "grading" / f"baseline-{split}")
    baselines = time.perf_counter() - t1
    total = time.perf_counter() - t0
    say(f"preparing_fresh_home_baselines_s: {baselines:.2f} s (baseline dev + test on a new grading folder, "
        f"its server started ahead{'' if built else ', with no build to overlap: BENCH_BUILD=0'})")
    say(f"preparing_fresh_home_s: {total:.2f} s (model build {built:.2f} s + baselines; budget "
        f"{built + two_warm:.2f} s = build + warm gradings of dev and test; ratio {total / (built + two_warm):.2f}; load average "
        f"{os.getloadavg()[0]:.1f})")


def say(line: str) -> None:
    print(line, flush=True)      # as measured: a run cut short still reports what it measured


def main():
    from autorl_tui.grading_host import grader_service
    from autorl_tui.isolation.sandbox_bwrap import probe

    cache = Path(os.environ.get("AUTORL_TEST_CACHE", REPO / ".pytest_cache" / "autorl-models"))
    model = build_tiny_model(cache / f"tiny-{source_key()}", seed=0)   # shared with the tests' cache
    card = find_task("arith", task_search_path())
    sandboxed, why = probe()
    say(f"(tiny model, arith dev, batch {card.protocol.batch_size}, max_tokens {card.protocol.max_tokens}, "
        f"{THREADS} threads, median of {RUNS}; {'sandboxed: ' + why if sandboxed else 'NOT sandboxed, cold path only: ' + why}; "
        f"load average {os.getloadavg()[0]:.1f})")
    base = Path(tempfile.mkdtemp(prefix="bench-grading-", dir="/tmp"))
    os.chmod(base, 0o711)          # the sandboxed grader's uid must reach the model and the split
    try:
        dev = materialize(card, "dev", base / "cache")
        test = materialize(card, "test", base / "cache")
        items = read_items(dev)
        os.environ[grader_service.DISABLE_ENV] = "1"
        first, _ = grade(request(card, "dev", dev, model), base / "gradings" / "first")
        raw_once = raw_inference(card, items, model, THREADS)
        walls, outcomes, raws, loads = [], [], [], []
        for i in range(RUNS):      # side by side, in alternating order
            loads.append(os.getloadavg()[0])
            for side in ("grade", "raw") if i % 2 == 0 else ("raw", "grade"):
                time.sleep(SETTLE_S)
                if side == "raw":
                    raws.append(raw_once())
                else:
                    wall, outcome = grade(request(card, "dev", dev, model), base / "gradings" / f"w{i}")
                    walls.append(wall)
                    outcomes.append(outcome)
        raw = statistics.median(raws)
        wall = statistics.median(walls)
        ratios = [w / r for w, r in zip(walls, raws)]
        t = outcomes[walls.index(sorted(walls)[len(walls) // 2])].timings
        say(f"raw_inference_same_split: {raw:.2f} s")
        say(f"grading_wall_per_submission: {wall:.2f} s")
        say(f"grading_wall_over_inference: {statistics.median(ratios):.2f} (target <= 1.2; median of the runs' "
            f"ratios {' '.join(f'{r:.2f}' for r in ratios)}; ratio of the medians {wall / raw:.2f}; load average "
            f"{' '.join(f'{x:.1f}' for x in loads)})")
        say(f"grading_in_child_load: {t['load_s']:.2f} s")
        say(f"grading_in_child_inference: {t['inference_s']:.2f} s")
        fixed = statistics.median(w - o.timings["inference_s"] for w, o in zip(walls, outcomes))
        say(f"grading_fixed_cost: {fixed:.3f} s (wall less the child's inference; target <= {0.2 * raw:.3f} s)")
        say(f"grading_phases_ms: {phase_medians_ms(outcomes)}")
        server_start = grader_service.POOL.idle()[0].import_s if grader_service.POOL.idle() else float("nan")
        say(f"grading_first_with_server_start: {first:.2f} s (server start {server_start:.2f} s)")
        os.environ[grader_service.DISABLE_ENV] = "0"
        cold, cold_outcome = grade(request(card, "dev", dev, model), base / "cold" / "c0")
        os.environ[grader_service.DISABLE_ENV] = "1"
        say(f"grading_wall_cold_per_submission: {cold:.2f} s (score {cold_outcome.score:.1f}, warm "
            f"{outcomes[0].score:.1f}; n={len(items)})")
        fresh_gb, unchanged_gb = snapshot_figures(base / "snap")
        say(f"snapshot_s_per_gb_fresh: {fresh_gb:.2f} s/GB")
        say(f"snapshot_s_per_gb_unchanged: {unchanged_gb:.2f} s/GB")
        wall_test, _ = grade(request(card, "test", test, model), base / "gradings" / "test")   # the server is warm
        grader_service.close_all()
        preparing(card, dev, test, model, base / "fresh-home", wall + wall_test)
    finally:
        grader_service.close_all()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Throughput (issue 36), each figure beside its floor and the load average, before and after side
by side in one run ("before": each run its own grading server and one grading slot per engine, as
the engine graded until issue 36; "after": the engine's one shared server and its grading queue).
The tiny model on arith-small's dev split (40 problems; BENCH_TASK picks another task), sandboxed
warm grader, 1 thread per grading, BENCH_SLOTS (default: cores) slots.

- first_grading_of_a_run: a run's first grading (its baseline) when it needs its own server
  started (before) and when the engine's server is live (after); and three runs' first gradings at
  once. Floor: a warm grading of the split.
- concurrent_gradings: BENCH_RUNS_N (3) runs x BENCH_SUBMISSIONS (20) gradings submitted at once,
  the last answer's time; floor: the sum of the raw in-process inferences of those gradings /
  slots (raw: the split generated in this process, model loaded, same protocol and threads).
- snapshot_fresh_over_cp: grading_host/submissions.snapshot_folder of a fresh BENCH_SNAPSHOT_MB (1024)
  folder until the grading can start (copied in the kernel, not hashed yet) against `cp -r` of the
  same folder (both from the page cache, alternating, median of 3); and with the hashing that runs
  beside the grading (hash_snapshot) added.
- engine_start_s: Engine.start() + stop() in a fresh process for a home with no Docker runs
  (imports included), and what the Docker probe the start no longer makes costs here.
- store_at_N_runs: BENCH_STORE_RUNS (1000,10000; about 3.5 minutes here) synthetic finished runs in one plan, written
  through the Store API (tests/support/run_writer.py, small runs); `compare --plan` (JSON),
  `report` of one run (JSON), `runs list --json` and a page of 50, each a fresh CLI process
  (imports included), against the issue's bounds (compare < 5 s, report < 2 s).
- paired_grading_ratio_TASK_as_is / _TASK_with_N_busy (TASK: arith-small, then BENCH_PAIRED_TASKS,
  default arith, whose dev split's generation is ~4x longer): a warm grading against the same
  generation in this process, side by side, BENCH_PAIRS (8) pairs in alternating order (ABBA), each side right after
  the other (BENCH_SETTLE_S, default 0: on this VM a generation that starts after its process
  idled ~0.3 s or more runs ~1.5x slower, 0.27-0.33 s against 0.18-0.22 s back to back, while a
  grading child's generation follows its own model load and escapes that; a settle of 0.5 s gave
  the raw side alone that penalty, a floor of 0.29-0.34 s and the child's inference 0.68-0.72x the
  raw one; back to back both sides' generations cost the same, 0.92-0.99x); as the machine is,
  then with one busy process per core that the bench starts itself (issue 36: <= 1.2 both); the
  median of the pairs' ratios and the ratio of the medians, the child's own inference against the
  raw one (a fair pair: ~1.0), and the gradings' spans (`phases`, medians); and
  grading_back_to_back_over_settled, a grading sent as the previous one is answered against one
  sent 1.5 s later (a suspect of the slowdown under load).
BENCH_ONLY=store (or grading, paired, snapshot, engine) runs one part.
"""
import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "GOMP_SPINCOUNT": "1000",
                   "TOKENIZERS_PARALLELISM": "false"})
from autorl_tui.catalog.tasks import find_task, materialize, read_items, task_search_path  # noqa: E402
from autorl_tui.tasks.arith.tiny_model import build_tiny_model, source_key  # noqa: E402
from benchmarks._raw_inference import phase_medians_ms, raw_inference  # noqa: E402

THREADS = 1
SLOTS = int(os.environ.get("BENCH_SLOTS") or os.cpu_count() or 1)
RUNS_N = int(os.environ.get("BENCH_RUNS_N", "3"))
SUBMISSIONS = int(os.environ.get("BENCH_SUBMISSIONS", "20"))
SNAPSHOT_MB = int(os.environ.get("BENCH_SNAPSHOT_MB", "1024"))
PAIRS = int(os.environ.get("BENCH_PAIRS", "8"))
SETTLE_S = float(os.environ.get("BENCH_SETTLE_S", "0"))
TASK = os.environ.get("BENCH_TASK", "arith-small")
# The paired ratio on these tasks' dev splits too (arith: 200 problems, a ~0.5 s generation at idle
# where arith-small's 40 take ~0.1-0.15 s; the "project's bench" figures were arith's).
PAIRED_TASKS = [t for t in os.environ.get("BENCH_PAIRED_TASKS", "arith").split(",") if t and t != TASK]
TASKS = REPO / "tests" / "data" / "tasks"


def say(line: str) -> None:
    print(line, flush=True)


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def request(card, split_path: Path, model: Path) -> dict:
    return {"task": card.to_dict(), "split": "dev", "split_path": str(split_path), "model_path": str(model),
            "protocol": card.protocol.to_dict(), "scorer": card.scorer, "scorer_options": {},
            "backend": "transformers", "device": "cpu", "threads": THREADS, "seed": card.protocol.seed}


async def _grade(req: dict, work: Path, root: Path | None):
    from autorl_tui.grading_host.grading_client import run_grader

    outcome = await run_grader(req, work, threads=THREADS, timeout_s=1800, grading_root=root)
    if not outcome.ok:
        raise SystemExit(f"grading failed: {outcome.error}")
    return outcome


async def _many(req: dict, base: Path, runs: int, per_run: int, shared: bool, slots: int) -> float:
    """runs x per_run gradings submitted at once; returns the time of the last answer. Before: one
    server per run's folder and one slot; after: the engine's folder, its queue with `slots`."""
    from autorl_tui.grading_host.grading_queue import GradingQueue

    queue = GradingQueue(slots)
    root = base / "gradings" if shared else None

    async def one(run: int, seq: int) -> None:
        async with queue.slot(f"r{run}"):
            folder = (base / "gradings" / f"r{run}") if shared else (base / f"run{run}" / "grading")
            await _grade(req, folder / f"s{seq:03d}", root)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(r, s) for s in range(per_run) for r in range(runs)))
    return time.perf_counter() - t0


def _engine_server(req: dict, root: Path) -> None:
    """The engine's shared server for `root`, started as the engine starts it and waited for."""
    from autorl_tui.grading_host import grader_service
    from autorl_tui.grading_host.grading_client import prestart_warm

    prestart_warm(req, root / "_" / "_", threads=THREADS, grading_root=root)
    key = grader_service.server_key(req, root / "_" / "_", None, THREADS, None, root)
    grader_service.POOL.give_back(grader_service.POOL.take(key, {}))


def first_gradings(req: dict, base: Path, warm_s: float) -> None:
    from autorl_tui.grading_host import grader_service

    grader_service.close_all()
    t0 = time.perf_counter()
    asyncio.run(_grade(req, base / "own" / "grading" / "baseline-dev", None))
    before = time.perf_counter() - t0
    grader_service.close_all()
    _engine_server(req, base / "gradings")
    t0 = time.perf_counter()
    asyncio.run(_grade(req, base / "gradings" / "first" / "baseline-dev", base / "gradings"))
    after = time.perf_counter() - t0
    say(f"first_grading_of_a_run_s: before {before:.2f} (own server started) | after {after:.2f} (engine's server "
        f"live) | floor {warm_s:.2f} (a warm grading) | ratio to floor before {before / warm_s:.2f} after "
        f"{after / warm_s:.2f} | {load()}")
    grader_service.close_all()
    t0 = time.perf_counter()
    asyncio.run(_many(req, base / "three-before", 3, 1, shared=False, slots=1))
    before3 = time.perf_counter() - t0
    grader_service.close_all()
    _engine_server(req, base / "three-after" / "gradings")
    t0 = time.perf_counter()
    asyncio.run(_many(req, base / "three-after", 3, 1, shared=True, slots=SLOTS))
    after3 = time.perf_counter() - t0
    floor3 = 3 * warm_s / SLOTS
    say(f"first_gradings_3_runs_at_once_s: before {before3:.2f} (3 servers, 1 slot) | after {after3:.2f} "
        f"(1 server, {SLOTS} slots) | floor {floor3:.2f} (3 warm gradings / slots) | ratio to floor before "
        f"{before3 / floor3:.2f} after {after3 / floor3:.2f} | {load()}")


def concurrent(req: dict, base: Path, raw_s: float) -> None:
    from autorl_tui.grading_host import grader_service

    n = RUNS_N * SUBMISSIONS
    floor = n * raw_s / SLOTS
    results = {}
    for label, shared, slots in (("before", False, 1), ("after", True, SLOTS)):
        grader_service.close_all()
        loads = [os.getloadavg()[0]]
        results[label] = asyncio.run(_many(req, base / f"many-{label}", RUNS_N, SUBMISSIONS, shared, slots))
        loads.append(os.getloadavg()[0])
        say(f"concurrent_gradings_{label}_s: {results[label]:.2f} ({RUNS_N} runs x {SUBMISSIONS} at once, last "
            f"answer; {'a server per run, 1 slot' if not shared else f'one server, {slots} slots'}) | floor "
            f"{floor:.2f} (sum of raw inferences {n} x {raw_s:.2f} s / {SLOTS} slots) | ratio {results[label] / floor:.2f}"
            f" | load {loads[0]:.1f}-{loads[1]:.1f}")
    grader_service.close_all()


BUSY = "import os, time\nend = time.monotonic() + 1800\nwhile time.monotonic() < end and os.getppid() != 1:\n    pass\n"


def paired(req: dict, base: Path, raw_once, label: str) -> None:
    """A warm grading and the same generation in this process, side by side (alternating, each
    SETTLE_S after the other: module docstring), PAIRS times: the median of the pairs' ratios, the
    grading child's own inference against the raw one (what the child's generation alone costs;
    ~1.0 when both sides are measured alike) and the gradings' spans."""
    asyncio.run(_grade(req, base / f"paired-{label}" / "warm", None))    # its server started, warm
    walls, raws, child, loads, outcomes = [], [], [], [], []
    for i in range(PAIRS):
        loads.append(os.getloadavg()[0])
        for side in ("grade", "raw") if i % 2 == 0 else ("raw", "grade"):
            time.sleep(SETTLE_S)
            if side == "raw":
                raws.append(raw_once())
            else:
                t0 = time.perf_counter()
                outcome = asyncio.run(_grade(req, base / f"paired-{label}" / f"p{i}", None))
                walls.append(time.perf_counter() - t0)
                child.append(outcome.timings["inference_s"])
                outcomes.append(outcome)
    ratios = [w / r for w, r in zip(walls, raws)]
    inner = [c / r for c, r in zip(child, raws)]
    wall, raw = statistics.median(walls), statistics.median(raws)
    say(f"paired_grading_ratio_{label}: {statistics.median(ratios):.2f} (target <= 1.2; floor: the same generation "
        f"in this process, {raw:.3f} s; grading {wall:.3f} s; ratio of the medians {wall / raw:.2f}; pairs "
        f"{' '.join(f'{r:.2f}' for r in ratios)}; the child's own inference {statistics.median(inner):.2f}x; settle "
        f"{SETTLE_S:g} s) | load {' '.join(f'{x:.1f}' for x in loads)}")
    say(f"paired_grading_phases_ms_{label}: {phase_medians_ms(outcomes)}")


def back_to_back(req: dict, base: Path) -> None:
    """A/B of one suspect: a grading sent the moment the previous one is answered (its spare child
    then still warming up, the previous child leaving) against one sent SETTLE_S later."""
    settle = 1.5
    rows: dict[str, list] = {"back_to_back": [], "settled": []}
    asyncio.run(_grade(req, base / "b2b" / "warm", None))
    loads = []
    for i in range(PAIRS + 2):
        loads.append(os.getloadavg()[0])
        for mode in ("back_to_back", "settled") if i % 2 == 0 else ("settled", "back_to_back"):
            time.sleep(settle if mode == "settled" else 0.0)
            t0 = time.perf_counter()
            outcome = asyncio.run(_grade(req, base / "b2b" / f"{mode}{i}", None))
            rows[mode].append((time.perf_counter() - t0, outcome.timings["inference_s"]))
    (bw, bi), (sw, si) = ((statistics.median(r[0] for r in rows[m]), statistics.median(r[1] for r in rows[m]))
                          for m in ("back_to_back", "settled"))
    say(f"grading_back_to_back_over_settled: {bw / sw:.2f} (floor: the same grading {settle} s after the previous "
        f"one, {sw:.2f} s; back to back {bw:.2f} s; the child's inference {bi:.2f} s vs {si:.2f} s) | load "
        f"{' '.join(f'{x:.1f}' for x in loads)}")


def paired_idle_and_loaded(req: dict, base: Path, raw_once, task: str) -> None:
    """The paired ratio as the machine is, then under a load this bench makes itself: one busy
    process per core (plain Python loops, the same priority as the grading and the raw inference),
    each in a session of its own, as other programs' load is: with the kernel's autogroups (one
    scheduling group per session) a busy loop in this process's session would take its CPU share
    from the raw inference alone (the grading child runs in a session of its own)."""
    paired(req, base, raw_once, f"{task}_as_is")
    busy = [subprocess.Popen([sys.executable, "-c", BUSY], start_new_session=True) for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(2.0)
        paired(req, base, raw_once, f"{task}_with_{len(busy)}_busy")
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()


def snapshot_vs_cp(base: Path) -> None:
    from autorl_tui.grading_host.submissions import RACY_NS, hash_snapshot, snapshot_folder

    src = base / "snap-src" / "v1"
    src.mkdir(parents=True)
    (src / "config.json").write_text("{}")
    chunk = os.urandom(1 << 20)
    for part in range(4):      # a sharded checkpoint: 4 files
        with open(src / f"model-{part:05d}-of-00004.safetensors", "wb") as fh:
            for i in range(SNAPSHOT_MB // 4):
                fh.write(chunk[:-8] + (part * 100000 + i).to_bytes(8, "little"))
    while time.time_ns() - max(p.stat().st_ctime_ns for p in src.iterdir()) <= RACY_NS:
        time.sleep(0.1)
    snaps, hashes, cps, loads = [], [], [], []
    for i in range(3):
        loads.append(os.getloadavg()[0])
        for side in ("snap", "cp") if i % 2 == 0 else ("cp", "snap"):
            if side == "cp":
                t0 = time.perf_counter()
                subprocess.run(["cp", "-r", str(src), str(base / f"cp{i}")], check=True)
                cps.append(time.perf_counter() - t0)
                shutil.rmtree(base / f"cp{i}")
            else:
                root = base / f"snaps{i}" / "r1"       # a fresh run: nothing of it hashed before
                t0 = time.perf_counter()
                snap = snapshot_folder(src, root / "001", 1 << 40, defer_hash_over=0)   # the grading starts here
                snaps.append(time.perf_counter() - t0)
                hash_snapshot(snap)                    # beside the grading: duplicate detection settles
                hashes.append(time.perf_counter() - t0)
                shutil.rmtree(root.parent)
    ratios = [s / c for s, c in zip(snaps, cps)]
    settled = [h / c for h, c in zip(hashes, cps)]
    say(f"snapshot_fresh_over_cp: {statistics.median(ratios):.2f} (target <= 1.2; {SNAPSHOT_MB} MiB in 5 files, "
        f"until the grading can start; snapshot {statistics.median(snaps):.2f} s, cp -r {statistics.median(cps):.2f} s; "
        f"pairs {' '.join(f'{r:.2f}' for r in ratios)}) | hashed too (beside the grading): "
        f"{statistics.median(settled):.2f} ({statistics.median(hashes):.2f} s) | load {' '.join(f'{x:.1f}' for x in loads)}")


ENGINE_START = """
import asyncio, sys, time
t0 = time.perf_counter()
from autorl_tui.engine.engine import Engine
from autorl_tui.home import Home
async def main():
    engine = Engine(Home(__import__('pathlib').Path(sys.argv[1])))
    await engine.start()
    started = time.perf_counter() - t0
    t1 = time.perf_counter()
    try:                  # what the start would cost with a Docker run in the home: the probe for orphans
        engine.executor("docker").reap_leftovers(set())
    except Exception:
        pass
    probe = time.perf_counter() - t1
    await engine.stop()
    print(f"{started:.3f} {probe:.3f}")
asyncio.run(main())
"""


def engine_start(base: Path) -> None:
    starts, probes = [], []
    for i in range(3):
        home = base / f"engine-home{i}"
        out = subprocess.run([sys.executable, "-c", ENGINE_START, str(home)], capture_output=True, text=True,
                             cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
        if out.returncode:
            raise SystemExit(f"engine start failed: {out.stderr[-2000:]}")
        s, p = out.stdout.split()[-2:]
        starts.append(float(s))
        probes.append(float(p))
    say(f"engine_start_s: {statistics.median(starts):.2f} (floor: none; import + Engine.start, a home with no Docker run; "
        f"runs {' '.join(f'{x:.2f}' for x in starts)}) | the Docker probe it no longer makes: "
        f"{statistics.median(probes):.2f} s | {load()}")


def store_scale(base: Path) -> None:
    from autorl_tui.store.db import Store
    from tests.support.run_writer import RunShape, write_run

    sizes = [int(x) for x in os.environ.get("BENCH_STORE_RUNS", "1000,10000").split(",") if x.strip()]
    home = base / "store-home"
    home.mkdir()
    store = Store(home / "store.db")
    written = 0
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def timed(*argv: str) -> str:
        """Wall seconds and the CPU seconds (user + system) of the command's process: on cores
        shared with other work the CPU time is the figure that compares across runs."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "autorl_tui", "--home", str(home), *argv], capture_output=True,
                              text=True, cwd=REPO, env=env)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode:
            raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr[-2000:]}")
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        return f"{wall:.2f} s (CPU {cpu:.2f} s)"

    for n in sizes:
        t0 = time.perf_counter()
        for i in range(written, n):
            write_run(store, RunShape(run_id=f"r{i + 1:05d}-arith-scale-s{i % 7}", seed=i % 7, plan="scale",
                                      agent=("scripted", "claude-code", "codex")[i % 3],
                                      task=("arith", "gsm8k")[i % 2], start=1.79e9 + i * 100, duration_s=60,
                                      scores=[20.0 + i % 5, 22.0 + i % 3], drops=[], n_stdout=2, metric_steps=2,
                                      n_samples=4, tokens=None))
        store.flush()
        build = time.perf_counter() - t0
        written = n
        compare = timed("compare", "--plan", "scale", "--json", str(base / "compare.json"))
        report = timed("report", "r00001", "--json", str(base / "report.json"))
        listed = timed("runs", "list", "--json")
        page = timed("runs", "list", "--json", "--limit", "50")
        say(f"store_at_{n}_runs: compare {compare} (bound 5 s) | report {report} (bound 2 s) | runs list "
            f"{listed}, a page of 50 {page} | written in {build:.1f} s | {load()}")
    store.close()


def main():
    from autorl_tui.grading_host import grader_service
    from autorl_tui.isolation.sandbox_bwrap import probe

    cache = Path(os.environ.get("AUTORL_TEST_CACHE", REPO / ".pytest_cache" / "autorl-models"))
    model = build_tiny_model(cache / f"tiny-{source_key()}", seed=0)
    card = find_task(TASK, task_search_path([TASKS]))
    sandboxed, why = probe()
    if not sandboxed:
        say(f"(not sandboxed: {why}; the warm grader is not used: grading figures skipped)")
    base = Path(tempfile.mkdtemp(prefix="bench-throughput-", dir="/tmp"))
    os.chmod(base, 0o711)
    os.environ[grader_service.DISABLE_ENV] = "1"
    try:
        say(f"(tiny model, {TASK} dev, {THREADS} thread per grading, {SLOTS} slots, {os.cpu_count()} cores; "
            f"{load()})")
        only = os.environ.get("BENCH_ONLY", "")
        if sandboxed and only in ("", "grading", "paired"):
            dev = materialize(card, "dev", base / "cache")
            req = request(card, dev, model)
            raw_once = raw_inference(card, read_items(dev), model, THREADS)
            raw_s = statistics.median(raw_once() for _ in range(3))
            asyncio.run(_grade(req, base / "warm" / "w0", None))
            t0 = time.perf_counter()
            asyncio.run(_grade(req, base / "warm" / "w1", None))
            warm_s = time.perf_counter() - t0
            say(f"raw_inference_s: {raw_s:.2f} | warm_grading_s: {warm_s:.2f} | {load()}")
            paired_idle_and_loaded(req, base, raw_once, TASK)
            for task in PAIRED_TASKS:       # a realistic split's generation beside the same fixed cost
                other = find_task(task, task_search_path([TASKS]))
                split = materialize(other, "dev", base / "cache")
                paired_idle_and_loaded(request(other, split, model), base,
                                       raw_inference(other, read_items(split), model, THREADS), task)
            back_to_back(req, base)
            if only == "paired":
                return
            first_gradings(req, base, warm_s)
            concurrent(req, base, raw_s)
        if only in ("", "snapshot"):
            snapshot_vs_cp(base)
        if only in ("", "engine"):
            engine_start(base)
        if only in ("", "store"):
            store_scale(base)
    finally:
        grader_service.close_all()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

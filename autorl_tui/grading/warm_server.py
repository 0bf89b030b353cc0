"""The warm grader's fork server: imports the inference stack once, then forks one grading child
per request. Started and spoken to by `grading_host/grader_service.py`; knows nothing of runs.

    python -m autorl_tui.grading.warm_server

It runs inside the grader's bubblewrap sandbox as root holding only CAP_SETUID, CAP_SETGID and
CAP_KILL (`Sandbox(keep_caps=...)`), and never touches a submission itself. Each grading's child
is forked ahead of its job (the fork of a large process is then off the grading's path) and
waits for the job on a pipe, running nothing; once it has the job, and before reading anything
of the request, it takes its own rlimits, drops to the uid the engine leased for that grading
(which clears every capability), sets no_new_privs and runs `grading/worker.py`'s `main` exactly
as the cold worker process does. The result file is written (whole: renamed into place) by `main`; the child
then says so on a second pipe and leaves with `os._exit` (no interpreter shutdown; the teardown
of its memory is not waited for). Then every process left under its uid, the leaving child
included, is killed (a helper drops to that uid and calls kill(-1)) and that uid's files in the
shared temp folders are removed, before the server reports the grading done. The helper is
forked by a small reaper process the server forked before its imports, so that it is cheap.

Nothing of torch runs a parallel region here before a fork (thread pools do not survive one):
imports, and the loading path exercised once on a tiny model of the harness's own (random
weights written through numpy), so its lazy imports and caches are in every child. The spare
child, while it waits for its job, warms itself up on that model, as root and before reading
anything of a submission: it loads it again (the pages of the loading path that a child must copy
from the server on first touch are then copied off the grading's path: a grading's model load
costs ~1/3 less CPU), then rehearses a grading on it through the worker's own path (the thread
pool at the grading's thread count, seeds, scorer, split read, generation's first-call set-up,
scoring, RESULT written). Each of the two steps starts only while no job waits. It warms up at
once where the machine left a CPU idle since the last grading's answer, else only after
WARMUP_PATIENCE_S without a job (`warm_up_when`: on a busy machine the warm-up took the running
grading's CPU).

Protocol, one JSON object per line: stdin gets {"job", "uid", "work_dir", "request", "result",
"env", "rlimits"}; stdout answers {"ready": true, "import_s"} once, then {"job", "status",
"warm_up", "stamps"} per job (status: exit code, or -signal; warm_up: how its child's warm-up
went, `_warm_up`; stamps: wall-clock times the job was accepted, its child said its result was
written, and its uid was cleaned up).
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import select
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from autorl_tui.grading.idle_cpu import IdleGauge

PRELOAD = ("transformers.models.llama.modeling_llama", "transformers.models.qwen2.modeling_qwen2",
           "transformers.models.qwen3.modeling_qwen3", "transformers.models.mistral.modeling_mistral",
           "transformers.models.gemma.modeling_gemma", "transformers.models.gemma2.modeling_gemma2",
           "transformers.models.phi3.modeling_phi3", "transformers.models.gpt2.modeling_gpt2",
           "transformers.models.gpt_neox.modeling_gpt_neox")
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm")
PR_SET_NO_NEW_PRIVS = 38
PR_SET_DUMPABLE = 4


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def preload() -> None:
    import importlib

    import torch  # noqa: F401
    import transformers
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    # Lazy modules: touching the names imports the auto classes, generation and tokenizer code.
    transformers.AutoModelForCausalLM, transformers.AutoTokenizer, transformers.PreTrainedTokenizerFast  # noqa: B018
    transformers.GenerationConfig  # noqa: B018
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass     # an older transformers without that architecture: loaded on demand in the child
    try:    # transformers 5 builds its table of checkpoint renamings (~900 regexes) at the first load
        from transformers.conversion_mapping import get_checkpoint_conversion_mapping

        get_checkpoint_conversion_mapping("llama")
    except ImportError:
        pass
    import encodings.unicode_escape  # noqa: F401 - the tokenizer's decoding, at the first grading

    import jinja2  # noqa: F401 - chat templates
    import safetensors.torch  # noqa: F401

    from autorl_tui.catalog import tasks  # noqa: F401 - the worker reads splits with it
    from autorl_tui.grading import inference, worker  # noqa: F401
    from autorl_tui.grading.scorers import get_scorer

    get_scorer("exact_match")


def _child(job: dict, private_fds: list[int]) -> int:
    """In the forked child: become the grading's uid, then grade. Returns the exit code."""
    import resource

    for fd in private_fds:
        os.close(fd)
    os.setsid()
    for name, value in (job.get("rlimits") or {}).items():
        limit = getattr(resource, f"RLIMIT_{name.upper()}")
        resource.setrlimit(limit, (int(value), int(value)))
    uid = int(job["uid"])
    if uid <= 0:
        raise OSError("refusing to grade as root")
    os.setgroups([])
    os.setgid(uid)
    # From root to an unprivileged uid: permitted, effective and ambient caps cleared, in every
    # thread (glibc applies set*id to all of them; the warm-up's OpenMP threads included).
    os.setuid(uid)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    os.chdir(job["work_dir"])
    log = os.open("worker.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.close(null)
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in (job.get("env") or {}).items()})
    from autorl_tui.grading import worker

    return worker.main([job["request"], job["result"]], stamps={"child_ready": time.time()})


WARMUP_LAYERS = 8       # the loader compiles a regex per parameter name: layers 0-7 are then cached
WARMUP_PROMPT = "what is 1 + 2 ?"
WARMUP_SPLIT = "rehearsal.jsonl"     # two items for the spare's rehearsal of a grading
WARMUP_IDLE_CPUS = 0.5     # a spare warms up at once when the machine left this much CPU idle lately,
WARMUP_PATIENCE_S = 2.0    # else this long after its fork (grading/idle_cpu.py)


def write_warmup_model(folder: str) -> None:
    """A small Llama of random weights with a word-level tokenizer and the chat template of the
    harness's own models (catalog/model_builds.py, compiled once here), for the server to load
    once before its first fork (weights written through numpy's safetensors writer, so no torch op
    runs to make them) and for each spare child to warm up on."""
    import numpy as np
    import safetensors.numpy
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    from autorl_tui.catalog.model_builds import CHAT_TEMPLATE

    words = ["<unk>", "<pad>", "<eos>", "user", "assistant", "####", *"0123456789+-=?", "what", "is"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>",
                                                unk_token="<unk>", model_max_length=64)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)
    hidden, inter, vocab = 16, 32, len(words)
    config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter,
                                      num_hidden_layers=WARMUP_LAYERS, num_attention_heads=2, num_key_value_heads=1,
                                      max_position_embeddings=64, tie_word_embeddings=True,
                                      eos_token_id=2, pad_token_id=1, bos_token_id=None)
    config.save_pretrained(folder)
    rng = np.random.default_rng(0)
    shapes = {"model.embed_tokens.weight": (vocab, hidden), "model.norm.weight": (hidden,)}
    for i in range(WARMUP_LAYERS):
        shapes.update({f"model.layers.{i}.input_layernorm.weight": (hidden,),
                       f"model.layers.{i}.post_attention_layernorm.weight": (hidden,),
                       f"model.layers.{i}.self_attn.q_proj.weight": (hidden, hidden),
                       f"model.layers.{i}.self_attn.k_proj.weight": (hidden // 2, hidden),
                       f"model.layers.{i}.self_attn.v_proj.weight": (hidden // 2, hidden),
                       f"model.layers.{i}.self_attn.o_proj.weight": (hidden, hidden),
                       f"model.layers.{i}.mlp.gate_proj.weight": (inter, hidden),
                       f"model.layers.{i}.mlp.up_proj.weight": (inter, hidden),
                       f"model.layers.{i}.mlp.down_proj.weight": (hidden, inter)})
    safetensors.numpy.save_file({k: (rng.standard_normal(v) * 0.1).astype(np.float32) for k, v in shapes.items()},
                                os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(folder, WARMUP_SPLIT), "w") as fh:
        for i, prompt in enumerate((WARMUP_PROMPT, WARMUP_PROMPT + " 4")):
            fh.write(json.dumps({"id": f"w{i}", "prompt": prompt, "answer": str(3 + 4 * i)}) + "\n")


def load_warmup_model(folder: str) -> None:
    """In the server, once: load the warm-up model (tokenizer, chat template, weights) without
    running it, so the loading path's lazy imports, compiled regexes and caches are in every
    child. Its tensors are tiny: no parallel region runs, so no thread pool starts before a fork."""
    from autorl_tui.grading.inference import (
        TransformersPolicy,
        _render,
        seed_everything,
    )

    seed_everything(0)            # the first call sets up torch's generators (no parallel region either)
    policy = TransformersPolicy(folder, batch_size=2)
    policy.tokenizer([_render(policy.tokenizer, WARMUP_PROMPT, "chat", "system")], return_tensors="pt",
                     padding=True, add_special_tokens=False)


def warm_up_child(folder: str, job_r: int, cuda: str | None = None) -> dict | None:
    """In a spare child, before its job: load the warm-up model, then rehearse a grading on it
    (the worker's own path: seeds, protocol, scorer, split read, generation, scoring, RESULT
    written, into the warm-up folder), at the server's thread count (the engine's OMP_NUM_THREADS
    for this server, as the grading's): what a grading child does the first time (~15-30 ms of it
    under load, docs/grading.md) is then done. Each step starts only while no job (nor the server's
    end) waits on job_r, so a grading that comes meanwhile waits for one step at most. Runs nothing
    of a submission; the worker seeds every generator and sets its thread count again before its
    own model. With `cuda` (the devices, as the grading's CUDA_VISIBLE_DEVICES names them) the
    rehearsal runs on the GPU: the child's CUDA context and the kernels a grading loads on its
    first calls are then open before the job (the server itself never touches CUDA: a context
    does not survive a fork). Returns the rehearsal's RESULT (None when a job came first)."""
    import torch

    from autorl_tui.grading import worker
    from autorl_tui.grading.inference import TransformersPolicy

    def idle() -> bool:
        return not select.select([job_r], [], [], 0)[0]

    if not idle():
        return None
    threads = max(1, int(os.environ.get("OMP_NUM_THREADS") or 1))
    torch.set_num_threads(threads)
    torch.ones(1 << 17).add_(1)     # large enough for a parallel region: the OpenMP pool starts here
    device = "cpu"
    if cuda:
        os.environ["CUDA_VISIBLE_DEVICES"] = cuda
        try:
            torch.cuda.init()
            device = "cuda"
        except (RuntimeError, AssertionError) as exc:   # no CUDA in this torch, or no device: rehearse on the CPU
            os.write(2, f"warm grader child: CUDA warm-up on {cuda} not possible ({exc}); warming up on the CPU\n"
                     .encode())
            cuda = None
    policy = TransformersPolicy(folder, device=device, batch_size=2)
    if not idle():
        return None
    result = worker.evaluate_request(
        {"split": "dev", "split_path": os.path.join(folder, WARMUP_SPLIT), "model_path": folder,
         "scorer": "exact_match", "threads": threads, "seed": 0, "scratch_dir": os.path.join(folder, "scratch"),
         "device": device, "protocol": {"max_tokens": 4, "batch_size": 2}}, policy=policy)
    written = Path(folder) / f"rehearsal-{os.getpid()}.json"
    worker.write_result(written, result)
    written.unlink()
    if cuda:
        del policy
        torch.cuda.empty_cache()      # the context stays; the warm-up model's memory goes back
    return result


@dataclass
class _Child:
    """A grading child forked ahead of its job: it reads the job from job_w's pipe and, once its
    RESULT is written, writes its exit code (one byte) to done_r's pipe and leaves."""
    pid: int
    job_w: int
    done_r: int
    warming: bool = False       # it was given the warm-up model
    eager: bool = True          # it warms up at once (else after WARMUP_PATIENCE_S: warm_up_when)
    forked: float = 0.0         # monotonic
    warm_up: str = "none"       # set at its hand-over, for the answer: how its warm-up went (_warm_up)


def _spawn(private_fds: list[int], warmup: str | None = None, cuda: str | None = None, eager: bool = True) -> _Child:
    """Fork a child that waits for its job, warming up on the server's model in `warmup` (a
    folder) meanwhile (`warm_up_child`; its thread pool is its own: the server never ran a
    parallel region): at once when `eager`, else after WARMUP_PATIENCE_S if no job came by then
    (`warm_up_when`). Closing its job pipe without writing ends it."""
    job_r, job_w = os.pipe()
    done_r, done_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        os.close(job_r)
        os.close(done_w)
        return _Child(pid, job_w, done_r, warming=bool(warmup), eager=eager, forked=time.monotonic())
    code = 3
    try:
        for fd in (job_w, done_r, *private_fds):
            os.close(fd)
        if warmup and (eager or not select.select([job_r], [], [], WARMUP_PATIENCE_S)[0]):
            try:
                warm_up_child(warmup, job_r, cuda)
            except Exception as exc:  # noqa: BLE001 - an optimisation: the grading then pays the first calls
                os.write(2, f"warm grader child: no warm-up: {type(exc).__name__}: {exc}\n".encode())
        chunks = []
        while chunk := os.read(job_r, 1 << 16):
            chunks.append(chunk)
        os.close(job_r)
        if not chunks:
            code = 0                   # the server ended, or let this spare go
        else:
            code = _child(json.loads(b"".join(chunks)), [])
    except BaseException as exc:  # noqa: BLE001 - the log says why; the engine reports "no result"
        try:
            os.write(2, f"warm grader child: {type(exc).__name__}: {exc}\n".encode())
        except OSError:
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            os.write(done_w, bytes([code & 0x7F]))     # done: the server need not wait for the exit
        finally:
            os._exit(code)


def warm_up_when(gauge: IdleGauge) -> bool:
    """Whether the spare forked now warms up at once (True) or only once WARMUP_PATIENCE_S have
    passed without a job: at once where the machine left at least WARMUP_IDLE_CPUS idle lately
    (since the last grading's answer, or a little longer: IdleGauge), or where it cannot tell. The
    spare is forked as a grading starts; on a machine without a CPU to spare its warm-up (~55 ms of
    CPU on the tiny model) took that grading's share: with one busy process per core a job's
    generation in a forked child ran 357 ms with the next spare warming beside it against 251 ms
    without (issue 36's A/B, docs/grading.md). There, gradings that come less than
    WARMUP_PATIENCE_S apart start cold instead, which costs them less."""
    idle = gauge.idle_cpus()
    return idle is None or idle >= WARMUP_IDLE_CPUS


def _warm_up(child: _Child) -> str:
    """How a spare's warm-up went by the time it got its job, as the server knows it (in the
    answer, so the grading's record says why a grading started cold): "at_once" (it may not have
    finished), "held_back" (the machine was busy and the job came within WARMUP_PATIENCE_S: none),
    "after_patience", or "none" (a fresh child, forked for the job; or no warm-up model)."""
    if not child.warming:
        return "none"
    if child.eager:
        return "at_once"
    return "after_patience" if time.monotonic() - child.forked >= WARMUP_PATIENCE_S else "held_back"


def _hand_over(child: _Child, job: dict) -> bool:
    """Give the job to a waiting child; False when it is gone (EPIPE: it died)."""
    data = json.dumps(job).encode()
    try:
        while data:
            data = data[os.write(child.job_w, data):]
        return True
    except OSError:
        return False
    finally:
        os.close(child.job_w)


def _wait_done(child: _Child) -> tuple[int, bool]:
    """(exit status, whether the child is still to be waited for). A child that says it is done
    has written its result and is leaving (its exit, the teardown of a large process, is not
    waited for here); one that ends without a word (killed, crashed) is waited for."""
    try:
        byte = os.read(child.done_r, 1)
    finally:
        os.close(child.done_r)
    if byte:
        return byte[0], True
    _, status = os.waitpid(child.pid, 0)
    return os.waitstatus_to_exitcode(status), False


def _reap_uid(uid: int) -> None:
    """Kill whatever the grading left running under its uid and remove its files from the shared
    temp folders, as that uid (so nothing else can be touched)."""
    if uid <= 0:
        return                  # never as root: kill(-1) would end the whole sandbox
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            for _ in range(3):        # a process forking meanwhile: again
                try:
                    os.kill(-1, 9)
                except ProcessLookupError:
                    break
            for top in SHARED_TMP:
                try:
                    entries = os.listdir(top)
                except OSError:
                    continue
                for name in entries:
                    path = os.path.join(top, name)
                    try:
                        if os.lstat(path).st_uid != uid:
                            continue
                        if os.path.isdir(path) and not os.path.islink(path):
                            shutil.rmtree(path, ignore_errors=True)
                        else:
                            os.unlink(path)
                    except OSError:
                        pass
        except BaseException:  # noqa: BLE001
            code = 1
        os._exit(code)
    os.waitpid(pid, 0)


class _Reaper:
    """A small process forked before the imports (so forking it again costs little) that kills a
    uid's leftovers on request: `_reap_uid` in its own child, then an answer."""

    def __init__(self, inherited: list[int]):
        req_r, self.req_w = os.pipe()
        self.ans_r, ans_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            code = 0
            try:
                for fd in (self.req_w, self.ans_r, *inherited):
                    os.close(fd)
                with os.fdopen(req_r, "r") as requests:
                    for line in requests:
                        _reap_uid(int(line))
                        os.write(ans_w, b"k")
            except BaseException:  # noqa: BLE001
                code = 1
            os._exit(code)
        os.close(req_r)
        os.close(ans_w)
        self.fds = [self.req_w, self.ans_r]

    def reap(self, uid: int) -> None:
        try:
            os.write(self.req_w, f"{int(uid)}\n".encode())
            if os.read(self.ans_r, 1) == b"k":
                return
        except OSError:
            pass
        _reap_uid(uid)          # the reaper is gone: from here, at the cost of a large fork


def cuda_warmup_devices(argv: list[str]) -> str | None:
    """`--cuda-warmup DEVICES` (grader_service.cuda_warmup_args): the devices the spare children
    open CUDA on before their job; None without it."""
    if "--cuda-warmup" not in argv:
        return None
    at = argv.index("--cuda-warmup") + 1
    if at >= len(argv) or not argv[at].strip() or argv[at].startswith("-"):
        raise SystemExit("warm grader: --cuda-warmup needs the devices (CUDA_VISIBLE_DEVICES's form, e.g. 0 or 0,1)")
    return argv[at]


def serve(argv: list[str] | None = None) -> int:
    t0 = time.perf_counter()
    cuda = cuda_warmup_devices(list(sys.argv[1:] if argv is None else argv))
    # The protocol gets private descriptors; fd 1 and 2 go to the server's log, so nothing an
    # import prints can be taken for an answer.
    proto_in, proto_out = os.dup(0), os.dup(1)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    _prctl(PR_SET_DUMPABLE, 0)
    reaper = _Reaper([proto_in, proto_out])
    preload()
    # Root's 0700 in the sandbox's own /tmp: no grading's uid reads or writes it; kept for the
    # spare children's warm-ups, gone with the sandbox.
    warmup: str | None = tempfile.mkdtemp(prefix=".autorl-warmup-", dir="/tmp")
    try:
        write_warmup_model(warmup)
        load_warmup_model(warmup)
    except Exception as exc:  # noqa: BLE001 - an optimisation: children then pay the first load themselves
        print(f"warm grader: no warm-up model: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        shutil.rmtree(warmup, ignore_errors=True)
        warmup = None
    # What the imports built is never freed: keep it out of the collector's sight, so a child's
    # collections neither walk it nor touch (copy) its pages.
    gc.collect()
    gc.freeze()
    private = [proto_in, proto_out, *reaper.fds]     # closed in every child
    spare: _Child | None = _spawn(private, warmup, cuda)
    gauge = IdleGauge()          # the idle CPU lately, read as a spare is forked (warm_up_when)
    inflight: dict[int, tuple[_Child, dict, float]] = {}     # done_r -> (child, job, accepted)
    # Children of answered gradings (killed with their uid before the answer), reaped the moment
    # they are gone: a pidfd each, readable at the exit, in the loop's select (no wait, no poll).
    leavers: dict[int, int] = {}       # pidfd -> pid
    writer = os.fdopen(proto_out, "w")

    def answer(obj: dict) -> None:
        writer.write(json.dumps(obj) + "\n")
        writer.flush()

    def held() -> list[int]:
        """Every descriptor a new child must close: the protocol, the reaper's, the pipes of the
        gradings in flight (a grading must not read another's done pipe) and the pidfds of leavers."""
        return private + list(inflight) + list(leavers) + ([spare.job_w, spare.done_r] if spare else [])

    def start(job: dict, accepted: float) -> None:
        nonlocal spare
        child, spare = spare, None
        if child is not None:
            child.warm_up = _warm_up(child)
        if child is None or not _hand_over(child, job):     # none ready (concurrent jobs), or it died
            if child is not None:
                os.close(child.done_r)
                os.waitpid(child.pid, 0)
            child = _spawn(held())                 # no warm-up: the job is here
            _hand_over(child, job)               # if this fresh child is gone too, its status says so
        inflight[child.done_r] = (child, job, accepted)
        if spare is None and len(inflight) == 1:
            # The next grading's child, warming up while this one grades (the only one: beside
            # another grading it is forked when one ends), so that a grading sent the moment this
            # one is answered starts warm instead of paying its warm-up itself (issue 36's A/B,
            # docs/grading.md: back to back 1.18-1.56x the same grading sent 1.5 s later, 0.89-1.01x so).
            spare = _spawn(held(), warmup, cuda, warm_up_when(gauge))

    def finish(fd: int) -> None:
        nonlocal spare
        child, job, accepted = inflight.pop(fd)
        status, leaving = _wait_done(child)
        done = time.time()
        # Before the answer: whatever runs under the grading's uid is killed (the leaving child
        # included), so nothing of the grading outlives it or touches its result once it is read.
        reaper.reap(int(job["uid"]))
        answer({"job": job.get("job"), "status": status, "warm_up": child.warm_up,
                "stamps": {"accepted": accepted, "child_done": done, "reaped": time.time()}})
        gauge.mark()            # the next spare's fork reads the idle CPU from here (warm_up_when)
        if spare is None:
            spare = _spawn(held(), warmup, cuda, warm_up_when(gauge))     # forked while the engine reads
        if leaving:
            _leaving(child.pid, leavers)

    answer({"ready": True, "import_s": round(time.perf_counter() - t0, 3), "pid": os.getpid()})
    # Gradings run concurrently, each in its own child (the engine decides how many at once); the
    # server only hands jobs over, answers, and cancels a job on request ({"cancel": JOB}: its
    # uid's processes killed, the child then answered as any that ended without a word).
    pending = b""
    open_in = True
    while open_in or inflight:
        ready, _, _ = select.select(([proto_in] if open_in else []) + list(inflight) + list(leavers), [], [])
        for fd in ready:
            if fd in leavers:
                _reap(fd, leavers)
                continue
            if fd != proto_in:
                finish(fd)
                continue
            chunk = os.read(proto_in, 1 << 16)
            if not chunk:
                open_in = False
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                accepted = time.time()
                try:
                    job = json.loads(line)
                except ValueError:
                    continue
                if "cancel" in job:
                    for _child, running, _ in list(inflight.values()):
                        if running.get("job") == job["cancel"]:
                            reaper.reap(int(running["uid"]))
                    continue
                start(job, accepted)
        if not open_in:
            break          # the engine is gone: the sandbox (and every child in it) ends with this process
    if spare is not None:
        os.close(spare.job_w)
        os.close(spare.done_r)
    if warmup:
        shutil.rmtree(warmup, ignore_errors=True)
    return 0


def _leaving(pid: int, leavers: dict[int, int]) -> None:
    """A child of an answered grading, to be reaped once it is gone (left as a zombie it would keep
    showing the uid until the next grading)."""
    try:
        leavers[os.pidfd_open(pid)] = pid
    except OSError:           # no pidfd here (Linux < 5.3): reaped now, waiting for its exit
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


def _reap(pidfd: int, leavers: dict[int, int]) -> None:
    pid = leavers.pop(pidfd)
    os.close(pidfd)
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


if __name__ == "__main__":
    sys.exit(serve())

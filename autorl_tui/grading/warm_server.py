"""The warm grader's fork server: imports the inference stack once, then forks one grading child
per request. Started and spoken to by `engine/grader_service.py`; knows nothing of runs.

    python -m autorl_tui.grading.warm_server

It runs inside the grader's bubblewrap sandbox as root holding only CAP_SETUID, CAP_SETGID and
CAP_KILL (`Sandbox(keep_caps=...)`), and never touches a submission itself: each child, right
after the fork and before reading anything of the request, takes its own rlimits, drops to the
uid the engine leased for that grading (which clears every capability), sets no_new_privs and
runs `grading/worker.py`'s `main` exactly as the cold worker process does. The result file is
written and fsynced by `main` before the child leaves with `os._exit` (no interpreter shutdown).
After a child ends, every process left under its uid is killed (a helper drops to that uid and
calls kill(-1)) and that uid's files in the shared temp folders are removed, before the server
reports the grading done.

Nothing of torch runs here before a fork (its thread pools do not survive one): only imports.

Protocol, one JSON object per line: stdin gets {"job", "uid", "work_dir", "request", "result",
"env", "rlimits"}; stdout answers {"ready": true, "import_s"} once, then {"job", "status"} per
job (status: exit code, or -signal; stamps: wall-clock times the job was accepted, its child
exited and its uid was cleaned up).
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import shutil
import sys
import time

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
    import jinja2  # noqa: F401 - chat templates
    import safetensors.torch  # noqa: F401

    from autorl_tui.grading import inference, worker  # noqa: F401
    from autorl_tui.grading.scorers import get_scorer

    get_scorer("exact_match")


def _child(job: dict, proto: tuple[int, int]) -> int:
    """In the forked child: become the grading's uid, then grade. Returns the exit code."""
    import resource

    for fd in proto:
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
    os.setuid(uid)             # from root to an unprivileged uid: permitted, effective and ambient caps cleared
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


def _reap_uid(uid: int) -> None:
    """Kill whatever the grading left running under its uid and remove its files from the shared
    temp folders, as that uid (so nothing else can be touched)."""
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


def serve() -> int:
    t0 = time.perf_counter()
    # The protocol gets private descriptors; fd 1 and 2 go to the server's log, so nothing an
    # import prints can be taken for an answer.
    proto_in, proto_out = os.dup(0), os.dup(1)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    _prctl(PR_SET_DUMPABLE, 0)
    preload()
    # What the imports built is never freed: keep it out of the collector's sight, so a child's
    # collections neither walk it nor touch (copy) its pages.
    gc.collect()
    gc.freeze()
    reader = os.fdopen(proto_in, "r")
    writer = os.fdopen(proto_out, "w")

    def answer(obj: dict) -> None:
        writer.write(json.dumps(obj) + "\n")
        writer.flush()

    answer({"ready": True, "import_s": round(time.perf_counter() - t0, 3), "pid": os.getpid()})
    for line in reader:
        accepted = time.time()
        try:
            job = json.loads(line)
        except ValueError:
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                code = _child(job, (proto_in, proto_out))
            except BaseException as exc:  # noqa: BLE001 - the log says why; the engine reports "no result"
                try:
                    os.write(2, f"warm grader child: {type(exc).__name__}: {exc}\n".encode())
                except OSError:
                    pass
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        _, status = os.waitpid(pid, 0)
        exited = time.time()
        _reap_uid(int(job["uid"]))
        answer({"job": job.get("job"), "status": os.waitstatus_to_exitcode(status),
                "stamps": {"accepted": accepted, "exited": exited, "reaped": time.time()}})
    return 0


if __name__ == "__main__":
    sys.exit(serve())

"""Starts the grader worker (a subprocess per evaluation) and reads its result. CPU- and
GPU-heavy work never runs in the engine's process, so the console stays responsive.

The worker handles untrusted input (the submitted model: weights, tokenizer, chat template), so
where the host can sandbox (`sandbox_bwrap.probe()`), it runs in a bubblewrap sandbox as a leased
unprivileged uid (never an agent's), seeing only the system, the Python runtime, the package, the
model, the split and the task folder (read-only) and its work dir (read-write), with rlimits:
processes, file size, open files, no core dumps, and memory (RLIMIT_DATA, grading/memory_limit.py:
`AUTORL_GRADER_MEMORY`, default half the host's memory), sandboxed or not.

Scorers that execute generated code (`unit_tests`) get, next to the worker, the code server
(grading/sandbox_remote.py): a separate process in a sandbox of its own (no network; the system,
the runtime and the package, task folders covered) that runs each program as another leased uid
in namespaces of its own. The worker reaches it through a socket (fd in $AUTORL_CODE_SANDBOX_FD);
the code server never sees the model, the split or the worker's files."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import resource
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from autorl_tui.safe_files import read_regular
from autorl_tui.grading import memory_limit
from autorl_tui.grading.progress import PROGRESS_FILE
from autorl_tui.grading.sandbox_identity import identity_env

GRADER_MODULE = "autorl_tui.grading.worker"
RUNS_GENERATED_CODE = {"unit_tests"}
RESULT_MAX_BYTES = 1 << 30
NPROC_LIMIT = 4096            # threads count too (torch, tokenizers); per uid, and the uid is the worker's alone
FSIZE_LIMIT = 16 << 30
NOFILE_LIMIT = 8192
CODE_SERVER_MODULE = "autorl_tui.grading.sandbox_remote"
# What grading/sandbox.py needs to give each program namespaces (SYS_ADMIN: unshare, tmpfs mounts)
# and a uid of its own (SETUID/SETGID/CHOWN; DAC_OVERRIDE: its runner, root, reads the program in
# the uid's 0700 folder), and to kill what a program leaves behind (KILL). Its view holds nothing
# secret: the system, the runtime and the package, read-only, and its own temp folders.
CODE_SERVER_CAPS = ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_KILL")
MAX_CODE_UIDS = 16


def _log_tail(work_dir: Path) -> str:
    from autorl_tui.safe_files import open_regular

    try:
        fd = open_regular(work_dir, "worker.log")
    except OSError as exc:
        return f"(worker.log unreadable: {exc})"
    try:
        size = os.fstat(fd).st_size
        return os.pread(fd, 2000, max(0, size - 2000)).decode(errors="replace")
    finally:
        os.close(fd)


def _not_world_readable(paths: list[Path]) -> Path | None:
    """The first file (or folder) under paths that a uid other than its owner cannot read."""
    import stat

    def under(root: Path):
        yield str(root)
        for top, dirs, files in os.walk(root):      # links to folders are not entered
            for name in (*dirs, *files):
                yield os.path.join(top, name)

    for root in paths:
        for p in under(root):
            try:
                mode = os.stat(p).st_mode
            except OSError:
                continue   # a dangling link: the worker reports it as it always did
            if not mode & stat.S_IROTH or (stat.S_ISDIR(mode) and not mode & stat.S_IXOTH):
                return Path(p)
    return None


def sandbox_probe() -> tuple[bool, str]:
    from autorl_tui.isolation.sandbox_bwrap import probe

    return probe()


def _limits(memory: int | None, sandboxed: bool) -> None:
    """In the child before exec (bwrap, then the worker, inherit them)."""
    memory_limit.apply(memory)
    if not sandboxed:
        return
    resource.setrlimit(resource.RLIMIT_NPROC, (NPROC_LIMIT, NPROC_LIMIT))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_LIMIT, FSIZE_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE_LIMIT, NOFILE_LIMIT))


def _grader_sandbox(request: dict, work_dir: Path, uid: int, gpus: list[str]):
    from autorl_tui.isolation.sandbox_bwrap import Sandbox

    package = Path(__file__).resolve().parents[1]
    ro = [package, Path(request["model_path"]), Path(request["split_path"])]
    if request.get("task", {}).get("dir"):
        ro.append(Path(request["task"]["dir"]))
    from autorl_tui.grading_host.grader_service import task_data_folders

    ro.extend(task_data_folders(request))
    rw = [work_dir]
    cache = request.get("scorer_options", {}).get("cache_path")
    if cache:   # the judge's answer cache (its own folder: see the supervisor)
        Path(cache).parent.mkdir(parents=True, exist_ok=True)
        os.chown(Path(cache).parent, uid, uid)
        for f in Path(cache).parent.iterdir():
            os.chown(f, uid, uid, follow_symlinks=False)
        rw.append(Path(cache).parent)
    return Sandbox(uid=uid, chdir=work_dir, ro=ro, rw=rw, gpus=gpus)


@dataclass
class _CodeServer:
    proc: asyncio.subprocess.Process
    worker_fd: int
    leases: list


async def _start_code_server(request: dict, work_dir: Path, python: str | None, env: dict) -> _CodeServer:
    """The code server for a grading that executes generated code: root in a sandbox of its own
    (no network, no task folders), holding only CODE_SERVER_CAPS, with one leased uid per slot."""
    from autorl_tui.isolation import sandbox_bwrap as sb

    workers = (request.get("scorer_options") or {}).get("workers", 2)
    count = max(1, min(MAX_CODE_UIDS, int(workers) if isinstance(workers, (int, float)) else 2))
    leases: list = []
    try:
        for _ in range(count):
            leases.append(sb.UidLease.acquire())
    except OSError:
        for lease in leases:
            lease.release()
        raise
    package = Path(__file__).resolve().parents[1]
    box = sb.Sandbox(uid=0, chdir=Path("/"), ro=[package], hide=[package / "tasks"], keep_caps=CODE_SERVER_CAPS,
                     network=False)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    argv = box.argv([python or sys.executable, "-m", CODE_SERVER_MODULE, str(theirs.fileno()),
                     *(str(lease.uid) for lease in leases)])
    server_env = {k: env[k] for k in ("PATH", "LANG", "PYTHONPATH") if k in env}
    log_path = work_dir / "code-server.log"
    log_path.unlink(missing_ok=True)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL, stdout=log_fd,
                                                    stderr=log_fd, env=server_env, start_new_session=True,
                                                    pass_fds=(theirs.fileno(),))
    except BaseException:
        ours.close()
        for lease in leases:
            lease.release()
        raise
    finally:
        os.close(log_fd)
        theirs.close()
    return _CodeServer(proc=proc, worker_fd=ours.detach(), leases=leases)


async def _stop_code_server(server: _CodeServer) -> None:
    try:
        os.close(server.worker_fd)
    except OSError:
        pass
    await _kill_group(server.proc)
    for lease in server.leases:
        lease.release()


@contextlib.contextmanager
def scoring_code_server(scorer_options: dict, work_dir: Path):
    """For scoring generated code in this process (`autorl-tui score`): the engine's own code server
    (the same sandbox root: system, runtime and package read-only, task folders covered, no
    network, leased uids), its socket in $AUTORL_CODE_SANDBOX_FD while the block runs, so the
    scorer's `code_sandbox()` sends every program there. Yields False, starting nothing, where the
    engine would not sandbox its grader either (not root, or no working bubblewrap)."""
    from autorl_tui.grading.sandbox_remote import FD_ENV

    if not sandbox_probe()[0]:
        yield False
        return
    loop = asyncio.new_event_loop()
    try:
        server = loop.run_until_complete(_start_code_server({"scorer_options": scorer_options}, Path(work_dir),
                                                            None, dict(os.environ)))
        os.environ[FD_ENV] = str(server.worker_fd)
        try:
            yield True
        finally:
            os.environ.pop(FD_ENV, None)
            loop.run_until_complete(_stop_code_server(server))
    finally:
        loop.close()


@dataclass
class GradingOutcome:
    ok: bool
    score: float | None = None
    metrics: dict = field(default_factory=dict)
    samples: list[dict] = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    grader_version: str | None = None
    error: str | None = None
    error_kind: str | None = None
    wall_s: float = 0.0
    phases: dict = field(default_factory=dict)     # where the wall time went: phase_breakdown()
    where: dict | None = None      # executor ray: the node (and GPUs) it was graded on (ray_grading.py)
    placement: dict | None = None  # backend, device(s) and vLLM settings as the worker ran them (placement.py)
    queue: dict | None = None      # the engine's grading queue: {"position" when it waited (0: not), "waited_s"}
    # The warm server it ran in: {"pid", "waited_s": for a server to be taken or started, "warm_up":
    # how its child's warm-up went, warm_server._warm_up}.
    server: dict | None = None


# The wall-clock stamps of one grading, in order, each naming the phase that ends at it. The
# engine stamps start/submitted/woken/outcome_read/done; the warm server accepted/child_done/reaped (its
# answer read: answer_read); the worker child_ready/request_read/load_start/loaded/evaluated.
PHASES = (("submitted", "prepare"),           # uid lease, staging links, request file, a server taken
          ("accepted", "to_server"),          # the job line reaches the server
          ("child_ready", "child_start"),     # to the child forked ahead (or a fresh fork); rlimits, setuid, log
          ("request_read", "read_request"),
          ("load_start", "worker_setup"),     # seeds, scorer, split
          ("loaded", "model_load"),
          ("evaluated", "evaluate"),          # split below into inference and scoring
          ("child_done", "result_write"),     # result written (the child's exit is not waited for)
          ("reaped", "uid_cleanup"),          # the uid's leftovers killed, its temp files removed
          ("answer_read", "answer_to_engine"),
          ("woken", "engine_wakeup"),
          ("outcome_read", "read_result"),
          ("done", "finish"))                 # staged inputs removed, work dir back to root, lease released


def phase_breakdown(stamps: dict, timings: dict) -> dict[str, float]:
    """Seconds per phase from the stamps present (a missing stamp's phase is counted in the next
    one's); `evaluate` is split into `inference` and `scoring` by the worker's timings. Only sane
    numbers are used: the worker's stamps come from the graded model's uid."""
    clean = {k: float(v) for k, v in stamps.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if "start" not in clean:
        return {}
    out: dict[str, float] = {}
    last = clean["start"]
    for stamp, phase in PHASES:
        if stamp not in clean or clean[stamp] < last:
            continue
        out[phase] = round(clean[stamp] - last, 4)
        last = clean[stamp]
    inference = timings.get("inference_s")
    if "evaluate" in out and isinstance(inference, (int, float)) and 0 <= inference <= out["evaluate"]:
        out["inference"] = round(float(inference), 4)
        out["scoring"] = round(out.pop("evaluate") - inference, 4)
    out["total"] = round(last - clean["start"], 4)
    return out


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """The worker leads its own process group (start_new_session): end the whole group, so a hung
    worker's children cannot outlive it or keep holding the grading slot's resources."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.returncode is None:
        await proc.wait()


ProgressCallback = Callable[[int, int, str], None]
PROGRESS_POLL_S = 0.5
PROGRESS_EVERY_S = 2.0      # report at most this often, unless done moved by PROGRESS_STEP of total
PROGRESS_STEP = 0.10


def read_progress(work_dir: Path) -> tuple[int, int, str] | None:
    """The worker's progress file, or None while it has none or it is garbage (the worker runs an
    untrusted model: a bounded read of a regular file, and only sane numbers are believed)."""
    try:
        msg = json.loads(read_regular(work_dir, PROGRESS_FILE, 4096))
        done, total, stage = msg["done"], msg["total"], msg["stage"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if not (type(done) is int and type(total) is int and isinstance(stage, str)) or not 0 <= done <= total:
        return None
    return done, total, stage[:20]


class _ProgressThrottle:
    def __init__(self, callback: ProgressCallback):
        self.callback = callback
        self.last: tuple[int, int, str] | None = None
        self.last_t = 0.0

    def offer(self, progress: tuple[int, int, str] | None, *, final: bool = False) -> None:
        if progress is None or progress == self.last:
            return
        done, total, stage = progress
        prev_done = self.last[0] if self.last and self.last[1:] == (total, stage) else None
        due = (prev_done is None or done == total or final or time.monotonic() - self.last_t >= PROGRESS_EVERY_S
               or done - prev_done >= PROGRESS_STEP * total)
        if due:
            self.last, self.last_t = progress, time.monotonic()
            self.callback(done, total, stage)


async def wait_with_progress(waiter: asyncio.Future, work_dir: Path, timeout_s: float | None,
                             on_progress: ProgressCallback | None) -> None:
    """Wait for waiter (the worker's end) within timeout_s (asyncio.TimeoutError past it), passing
    the worker's progress to on_progress while it runs. Never cancels waiter."""
    throttle = _ProgressThrottle(on_progress) if on_progress else None
    end = None if timeout_s is None else time.monotonic() + timeout_s
    while not waiter.done():
        left = None if end is None else end - time.monotonic()
        if left is not None and left <= 0:
            raise asyncio.TimeoutError
        poll = None if throttle is None else PROGRESS_POLL_S
        await asyncio.wait({waiter}, timeout=poll if left is None else (left if poll is None else min(poll, left)))
        if throttle:
            throttle.offer(read_progress(work_dir), final=waiter.done())


def timed_out_outcome(timeout_s: float | None, t0: float) -> GradingOutcome:
    return GradingOutcome(ok=False, error=f"grading timed out after {timeout_s:.0f}s and was stopped: the "
                                          f"model took too long to load or answer (check its size, its "
                                          f"generation settings and its tokenizer's chat template)",
                          error_kind="timeout", wall_s=time.time() - t0)


def _write_request(req_path: Path, request: dict) -> None:
    req_path.unlink(missing_ok=True)   # a fresh file, never written through whatever an earlier worker left
    fd = os.open(req_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(request))


def _grader_env(request: dict, gpus: list[str] | None, threads: int) -> dict:
    from autorl_tui.grading_host.grader_service import task_data_env

    passed = {"PATH", "LANG", "HOME", "TMPDIR", *task_data_env(request)}
    env = {k: v for k, v in os.environ.items() if k in passed}
    env.update({"CUDA_VISIBLE_DEVICES": ",".join(gpus or []), "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                "OMP_NUM_THREADS": str(threads),
                "MKL_NUM_THREADS": str(threads), "GOMP_SPINCOUNT": "1000", "TOKENIZERS_PARALLELISM": "false",
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    if not gpus:
        # transformers loads weights through a new thread pool per model load unless told not to: on
        # a CPU grading's cores (1 thread per grading) that is threads started and handed off to per
        # grading, for reads from the page cache (docs/grading.md, "Where a warm grading's time goes").
        env["HF_DEACTIVATE_ASYNC_LOAD"] = "1"
    for key in request.get("pass_env", []):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def prestart_warm(request: dict, work_dir: Path, *, gpus: list[str] | None = None, threads: int = 1,
                  python: str | None = None, grading_root: Path | None = None) -> bool:
    """Start, in the background, the warm server a grading of `request` in `work_dir` would use
    (its split and model are not needed yet): a run's first grading then finds it started, its
    start having overlapped whatever came before (building the base model). False when such a
    grading would not be warm (cold path)."""
    from autorl_tui.grading_host import grader_service as gs

    if request.get("scorer") in RUNS_GENERATED_CODE or not _warm_eligible(request, sandbox_probe()[0]):
        return False
    work_dir = Path(os.path.abspath(work_dir))
    key = gs.server_key(request, work_dir, gpus, threads, python, grading_root)
    _grading_root(key.grading_root)
    env = _grader_env(request, gpus, threads)
    env.pop("TMPDIR", None)
    gs.POOL.prestart(key, {**env, "HOME": str(key.grading_root)})
    return True


def _grading_root(root: Path, work_dir: Path | None = None) -> None:
    """The server's folder of gradings, and every folder from it down to work_dir's parent (a run's
    folder in the engine's): root's, traverse only."""
    root.mkdir(parents=True, exist_ok=True)
    folders = [root]
    if work_dir is not None and work_dir.parent != root:
        folders += [p for p in work_dir.parents if p.is_relative_to(root) and p != root]
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        os.chown(folder, 0, 0, follow_symlinks=False)
        os.chmod(folder, 0o711)          # gradings may enter their own folder, never list the others


def _warm_eligible(request: dict, sandboxed: bool) -> bool:
    """The warm grader serves sandboxed gradings whose sandbox needs nothing per grading beyond
    its work dir, model and split (the judge's shared cache folder still takes the cold path)."""
    from autorl_tui.grading_host import grader_service

    return (sandboxed and grader_service.enabled() and not (request.get("scorer_options") or {}).get("cache_path")
            and request.get("scorer") not in RUNS_GENERATED_CODE)


async def run_grader(request: dict, work_dir: Path, *, gpus: list[str] | None = None, threads: int = 1,
                     timeout_s: float | None = None, python: str | None = None,
                     on_progress: ProgressCallback | None = None, grading_root: Path | None = None) -> GradingOutcome:
    """on_progress(done, total, stage), when given, hears the worker's progress while it runs (at
    most every PROGRESS_EVERY_S seconds, or sooner on a step of PROGRESS_STEP of the total).

    Sandboxed gradings go to the warm grader (grading_host/grader_service.py) unless AUTORL_WARM_GRADER=0;
    every grading's work dir should then lie in a folder of gradings (the server's view):
    `grading_root` (the engine's, shared by its runs), else work_dir's parent."""
    stamps = {"start": time.time()}
    outcome = await _run_grader(request, work_dir, gpus=gpus, threads=threads, timeout_s=timeout_s, python=python,
                                on_progress=on_progress, stamps=stamps, grading_root=grading_root)
    stamps["done"] = time.time()
    outcome.phases = phase_breakdown(stamps, outcome.timings)
    return outcome


async def _run_grader(request: dict, work_dir: Path, *, gpus: list[str] | None, threads: int,
                      timeout_s: float | None, python: str | None, on_progress: ProgressCallback | None,
                      stamps: dict, grading_root: Path | None = None) -> GradingOutcome:
    work_dir = Path(os.path.abspath(work_dir))
    work_dir.mkdir(parents=True, exist_ok=True)
    try:
        memory = memory_limit.limit_bytes()
    except memory_limit.BadMemorySetting as exc:
        return GradingOutcome(ok=False, error=str(exc), error_kind="internal")
    sandboxed = sandbox_probe()[0]
    if sandboxed:
        # The sandboxed worker can write only its work dir: its scratch space is there, whatever the caller named.
        request = {**request, "scratch_dir": str(work_dir / "scratch")}
    req_path, res_path = work_dir / "request.json", work_dir / "result.json"
    res_path.unlink(missing_ok=True)
    (work_dir / PROGRESS_FILE).unlink(missing_ok=True)
    env = _grader_env(request, gpus, threads)
    argv = [python or sys.executable, "-m", GRADER_MODULE, str(req_path), str(res_path)]
    lease = None
    code_server: _CodeServer | None = None
    pass_fds: tuple[int, ...] = ()
    staged: dict[str, str] = {}
    t0 = time.time()
    try:
        if sandboxed:
            from autorl_tui.isolation import sandbox_bwrap as sb

            hidden = _not_world_readable([Path(request["model_path"]), Path(request["split_path"])])
            if hidden:
                return GradingOutcome(ok=False, error_kind="internal",
                                      error=f"the grader runs sandboxed as an unprivileged uid and cannot read {hidden}; "
                                            f"make it readable by others (chmod -R o+rX on its folder)")
            lease = sb.UidLease.acquire()
            env.update(identity_env(str(work_dir)))   # no passwd entry for the leased uid
            env["CUDA_VISIBLE_DEVICES"] = sb.visible_devices(list(gpus or []))   # only its GPUs' nodes are there
            env.pop("TMPDIR", None)
            if _warm_eligible(request, sandboxed):
                outcome = await _run_warm(request, work_dir, lease.uid, env, gpus, threads, timeout_s, python,
                                          on_progress, staged, stamps, memory, grading_root)
                if outcome is not None:
                    return outcome
                t0 = time.time()
            sb.chown_tree(work_dir, lease.uid)
            argv = _grader_sandbox(request, work_dir, lease.uid, list(gpus or [])).argv(argv)
            if request.get("scorer") in RUNS_GENERATED_CODE:
                from autorl_tui.grading.sandbox_remote import FD_ENV

                try:
                    code_server = await _start_code_server(request, work_dir, python, env)
                except OSError as exc:
                    return GradingOutcome(ok=False, error_kind="internal",
                                          error=f"could not start the sandbox for generated code: {exc}")
                env[FD_ENV] = str(code_server.worker_fd)
                pass_fds = (code_server.worker_fd,)
        _write_request(req_path, request)
        (work_dir / "worker.log").unlink(missing_ok=True)
        log_fd = os.open(work_dir / "worker.log", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(log_fd, "wb") as log:
            proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log,
                                                        env=env, start_new_session=True, pass_fds=pass_fds,
                                                        preexec_fn=functools.partial(_limits, memory, sandboxed))
            if code_server is not None:      # the worker holds its end now; ours would keep the server from seeing EOF
                os.close(code_server.worker_fd)
                code_server.worker_fd = -1
            waiter = asyncio.ensure_future(proc.wait())
            try:
                await wait_with_progress(waiter, work_dir, timeout_s, on_progress)
            except asyncio.TimeoutError:
                await _kill_group(proc)
                return timed_out_outcome(timeout_s, t0)
            except asyncio.CancelledError:
                await _kill_group(proc)
                raise
            await _kill_group(proc)        # anything the worker left behind in its group
        stamps["woken"] = time.time()
        return _read_outcome(work_dir, res_path, proc.returncode, time.time() - t0, staged, stamps, memory)
    finally:
        if code_server is not None:
            await _stop_code_server(code_server)
        if lease is not None:
            lease.release()
        if staged:
            _unstage(work_dir)


async def _run_warm(request: dict, work_dir: Path, uid: int, env: dict, gpus: list[str] | None, threads: int,
                    timeout_s: float | None, python: str | None, on_progress: ProgressCallback | None,
                    staged: dict[str, str], stamps: dict, memory: int | None = None,
                    grading_root: Path | None = None) -> GradingOutcome | None:
    """One grading in a warm server's child; None when no server could start (the caller then
    takes the cold path)."""
    from autorl_tui.grading_host import grader_service as gs
    from autorl_tui.isolation import sandbox_bwrap as sb

    t0 = time.time()
    key = gs.server_key(request, work_dir, gpus, threads, python, grading_root)
    root = key.grading_root
    _grading_root(root, work_dir)
    request = _stage(request, work_dir, staged)
    sb.chown_tree(work_dir, uid, tuple(n for n in os.listdir(work_dir) if n != "input"))
    os.chmod(work_dir, 0o700)
    req_path, res_path = work_dir / "request.json", work_dir / "result.json"
    _write_request(req_path, request)
    (work_dir / "worker.log").unlink(missing_ok=True)
    server_env = {**env, "HOME": str(root)}
    taking = time.time()
    try:
        live = gs.POOL.take_live(key)       # the usual case; else wait for a start, in a thread
        server = live if live is not None else await asyncio.to_thread(gs.POOL.take, key, server_env)
    except (gs.ServerGone, OSError) as exc:
        print(f"warm grader unavailable, grading in a fresh worker: {exc}", file=sys.stderr)
        _unstage(work_dir)
        staged.clear()
        return None
    job = {"uid": uid, "work_dir": str(work_dir), "request": str(req_path), "result": str(res_path), "env": env,
           "rlimits": {"nproc": NPROC_LIMIT, "fsize": FSIZE_LIMIT, "core": 0, "nofile": NOFILE_LIMIT,
                       **({"data": memory} if memory else {})}}
    status = None
    try:
        stamps["submitted"] = time.time()
        job_id, waiter = server.submit(job)
        try:
            await wait_with_progress(waiter, work_dir, timeout_s, on_progress)
        except asyncio.TimeoutError:
            await _end_job(server, job_id, waiter)
            return timed_out_outcome(timeout_s, t0)
        except asyncio.CancelledError:
            await _end_job(server, job_id, waiter)
            raise
        answer = waiter.result()
        stamps["woken"] = time.time()
        stamps.update(answer.get("stamps") or {})
        status = answer.get("status")
    except gs.ServerGone as exc:
        server.kill()
        tail = _log_tail(work_dir).strip().splitlines()
        return GradingOutcome(ok=False, error=f"grader worker ended without a result ({exc}): "
                                              f"{tail[-1] if tail else 'no output'}",
                              error_kind="internal", wall_s=time.time() - t0)
    finally:
        gs.POOL.give_back(server)
    outcome = _read_outcome(work_dir, res_path, status, time.time() - t0, staged, stamps, memory)
    outcome.server = {"pid": server.proc.pid, "waited_s": round(stamps["submitted"] - taking, 3),
                      "warm_up": str(answer.get("warm_up") or "none")}
    return outcome


async def _end_job(server, job_id: int, waiter: asyncio.Future) -> None:
    """A grading past its time, or cancelled: the server kills its child (every process of its
    uid) and answers; the server's other gradings go on. A server that does not answer within
    KILL_WAIT_S is killed whole."""
    from autorl_tui.grading_host import grader_service as gs

    server.cancel(job_id)
    try:
        await asyncio.wait_for(asyncio.shield(waiter), gs.KILL_WAIT_S)
    except (asyncio.TimeoutError, gs.ServerGone):
        await asyncio.to_thread(server.kill)
    except asyncio.CancelledError:
        await asyncio.to_thread(server.kill)
        raise


def _link_tree(src: Path, dst: Path) -> None:
    """dst as a copy of src made of hard links (the snapshot store and the split cache are the
    harness's; the grading's uid reads them and cannot change them); copies across filesystems."""
    import shutil

    def link(s: str, d: str) -> None:
        try:
            os.link(s, d, follow_symlinks=False)
        except OSError:
            shutil.copy2(s, d, follow_symlinks=False)

    if src.is_dir() and not src.is_symlink():
        shutil.copytree(src, dst, symlinks=True, copy_function=link)
    else:
        link(str(src), str(dst))


def _stage(request: dict, work_dir: Path, staged: dict[str, str]) -> dict:
    """The model and the split, linked into work_dir/input (root-owned, readable): the only way
    they enter the warm server's fixed view."""
    import shutil

    inputs = work_dir / "input"
    if inputs.is_symlink() or inputs.exists():
        if inputs.is_dir() and not inputs.is_symlink():
            shutil.rmtree(inputs)
        else:
            inputs.unlink()
    inputs.mkdir(mode=0o755)
    os.chown(inputs, 0, 0)
    staged[str(inputs)] = str(inputs)     # marks the work dir as staged (to be given back to root)
    request = dict(request)
    for key, name in (("model_path", "model"), ("split_path", None)):
        src = Path(request[key])
        if not (src.exists() or src.is_symlink()):
            continue          # the worker reports it missing, under its own name
        dst = inputs / (name or f"split-{src.name}")
        _link_tree(src, dst)
        staged[str(dst)] = str(src)
        request[key] = str(dst)
    return request


def _unstage(work_dir: Path) -> None:
    """The grading is over: its inputs go, and its folder (results, logs) goes back to root."""
    import shutil

    from autorl_tui.isolation import sandbox_bwrap as sb

    shutil.rmtree(work_dir / "input", ignore_errors=True)
    try:
        sb.chown_tree(work_dir, 0)
        os.chmod(work_dir, 0o700)
    except OSError:
        pass


def _read_outcome(work_dir: Path, res_path: Path, returncode, wall: float, staged: dict[str, str],
                  stamps: dict, memory: int | None = None) -> GradingOutcome:
    try:
        # The sandboxed worker owns work_dir: read its result as a plain file, never through a link.
        result = json.loads(read_regular(work_dir, res_path.name, RESULT_MAX_BYTES))
        worker_stamps = result.get("stamps") if isinstance(result, dict) else None
        for key in ("child_ready", "request_read", "load_start", "loaded", "evaluated"):
            if isinstance(worker_stamps, dict) and key in worker_stamps:
                stamps[key] = worker_stamps[key]
        stamps["outcome_read"] = time.time()
    except (OSError, ValueError):
        tail = _log_tail(work_dir)
        if memory_limit.looks_like_oom(text=tail):     # a native allocator gave up and took the worker down
            last = tail.strip().splitlines()[-1] if tail.strip() else ""
            return GradingOutcome(ok=False, error=memory_limit.message(memory, last[:200]), error_kind="memory",
                                  wall_s=wall)
        return GradingOutcome(ok=False, error=f"grader worker exited with code {returncode} without a result: "
                                               f"{tail.strip().splitlines()[-1] if tail.strip() else 'no output'}",
                              error_kind="internal", wall_s=wall)
    if not result.get("ok"):
        error = str(result.get("error"))
        for inside, outside in staged.items():    # messages name the caller's paths, not the staging
            error = error.replace(inside, outside)
        return GradingOutcome(ok=False, error=error, error_kind=result.get("error_kind", "internal"),
                              grader_version=result.get("grader_version"), wall_s=wall)
    return GradingOutcome(ok=True, score=float(result["score"]), metrics=result.get("metrics", {}),
                          samples=result.get("samples", []), timings=result.get("timings", {}),
                          grader_version=result.get("grader_version"), wall_s=wall,
                          placement=_plain_placement(result.get("placement")))


def _plain_placement(raw) -> dict | None:
    """The worker's placement record, kept only as flat plain values (the worker ran as the graded
    model's uid: its result is data to check, not to trust)."""
    if not isinstance(raw, dict):
        return None
    out = {}
    for key, value in list(raw.items())[:32]:
        if isinstance(value, dict):
            value = {str(k)[:64]: v for k, v in list(value.items())[:16]
                     if v is None or isinstance(v, (str, int, float, bool))}
        elif isinstance(value, list):
            value = [v for v in value[:16] if isinstance(v, (str, int, float))]
        elif not (value is None or isinstance(value, (str, int, float, bool))):
            continue
        out[str(key)[:64]] = value[:400] if isinstance(value, str) else value
    return out

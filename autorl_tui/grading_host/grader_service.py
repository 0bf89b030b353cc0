"""The warm grader: long-lived grading servers (`grading/warm_server.py`) owned by the engine, one
per grading folder, device group and thread count (the engine's folder of gradings: one for all
its runs), each forking one sandboxed child per grading, several at once. The child
still runs as a uid leased for that grading alone, with the same rlimits and the same sandboxed
view as the cold worker; the server saves what every cold worker paid again: starting Python,
importing torch and transformers, loading the model code, and the interpreter's shutdown.

What the server sees (fixed when it starts): the system, the Python runtime, the package, the
task folder (read-only) and the grading folder (read-write: the parent of every grading's work
dir). That folder is root-owned 0711; each grading's work dir is given to its uid with mode 0700
and gets hard links to the model and the split (`input/`), removed afterwards, when the work dir
goes back to root (0700). A grading cannot list or read another grading's folder, an earlier
grading's results included, whichever uid it had.

A grading that hangs or is cancelled ends its child alone (the server kills every process of its
uid); a grading that crashes ends only its child; a server that does not answer a cancellation is
killed whole (its other gradings then fail as "ended without a result").
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from autorl_tui import settings

SERVER_MODULE = "autorl_tui.grading.warm_server"
SERVER_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_KILL")
START_TIMEOUT_S = 180.0
KILL_WAIT_S = 10.0
MAX_IDLE_SERVERS = 4
IDLE_S = 180.0                         # an idle server ends after this (its run is probably over)
DISABLE_ENV = "AUTORL_WARM_GRADER"     # "0": every grading in a fresh worker process (the cold path)


def enabled() -> bool:
    return settings.current().warm_grader


@dataclass(frozen=True)
class ServerKey:
    grading_root: Path
    task_dir: Path | None
    gpus: tuple[str, ...]
    threads: int
    python: str
    extra_ro: tuple[Path, ...] = ()


def cuda_warmup_args(key: ServerKey) -> list[str]:
    """The warm server's option that has its spare children open CUDA before their job (context,
    the inference kernels, on the warm-up model), on a server whose gradings run on GPUs: a
    grading's child otherwise pays that itself (docs/grading.md, "GPU figures"). The devices as
    the grading's own environment names them in its sandbox (the spare opens CUDA before the job's
    environment is set). Off with AUTORL_GRADER_CUDA_WARMUP=0, and where vLLM is installed (a vLLM
    engine started in a process that already holds a CUDA context must spawn its workers, not fork
    them: not tried on a GPU yet)."""
    if not key.gpus or not settings.current().grader_cuda_warmup:
        return []
    from autorl_tui.grading_host.grading_placement import vllm_installed
    from autorl_tui.isolation.sandbox_bwrap import visible_devices

    if vllm_installed():
        return []
    return ["--cuda-warmup", visible_devices(list(key.gpus))]


class ServerGone(Exception):
    """The server died (or was killed) before answering."""


@dataclass(eq=False)
class GraderServer:
    key: ServerKey
    proc: subprocess.Popen
    log_path: Path
    import_s: float = 0.0
    jobs: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = field(default_factory=dict)
    next_job: int = 1
    dead: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    last_used: float = field(default_factory=time.monotonic)
    users: int = 0                      # gradings holding it now (POOL.take .. give_back)

    @classmethod
    def start(cls, key: ServerKey, env: dict) -> "GraderServer":
        from autorl_tui.isolation.sandbox_bwrap import Sandbox

        package = Path(__file__).resolve().parents[1]
        ro = [package, *key.extra_ro] + ([key.task_dir] if key.task_dir else [])
        sandbox = Sandbox(uid=0, chdir=key.grading_root, ro=ro, rw=[key.grading_root], gpus=list(key.gpus),
                          keep_caps=SERVER_CAPS)
        argv = sandbox.argv([key.python, "-m", SERVER_MODULE, *cuda_warmup_args(key)])
        log_path = key.grading_root / ".grader-server.log"
        log_path.unlink(missing_ok=True)
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_fd, env=env,
                                    start_new_session=True, close_fds=True)
        finally:
            os.close(log_fd)
        server = cls(key=key, proc=proc, log_path=log_path)
        line = _readline_within(proc, START_TIMEOUT_S)
        try:
            ready = json.loads(line) if line else {}
        except ValueError:
            ready = {}
        if not ready.get("ready"):
            server.kill()
            raise ServerGone(f"the warm grader did not start: {_tail(log_path)}")
        server.import_s = float(ready.get("import_s") or 0.0)
        threading.Thread(target=server._read_answers, daemon=True, name="warm-grader").start()
        return server

    def _read_answers(self) -> None:
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                waiter = self.jobs.pop(msg.get("job"), None)
            if waiter:
                loop, fut = waiter
                msg["stamps"] = {**(msg.get("stamps") or {}), "answer_read": time.time()}
                _settle_from_thread(loop, fut, msg, None)
        self.dead = True
        with self.lock:
            waiters, self.jobs = list(self.jobs.values()), {}
        for loop, fut in waiters:
            _settle_from_thread(loop, fut, None, ServerGone(f"the warm grader exited: {_tail(self.log_path)}"))

    def submit(self, job: dict) -> tuple[int, asyncio.Future]:
        """Send one grading: (its job id, a future that gets the server's answer, {"status": the
        child's exit status, "stamps": {...}}, or ServerGone)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        with self.lock:
            if self.dead:
                raise ServerGone("the warm grader is not running")
            job_id = self.next_job
            self.next_job += 1
            self.jobs[job_id] = (loop, fut)
        try:
            self.proc.stdin.write((json.dumps({**job, "job": job_id}) + "\n").encode())
            self.proc.stdin.flush()
        except (OSError, ValueError) as exc:
            with self.lock:
                self.jobs.pop(job_id, None)
            raise ServerGone(f"the warm grader is not running: {exc}") from exc
        return job_id, fut

    def cancel(self, job_id: int) -> None:
        """End one grading: the server kills every process of its uid; its future then gets the
        child's status (-9). The server's other gradings go on."""
        try:
            self.proc.stdin.write((json.dumps({"cancel": job_id}) + "\n").encode())
            self.proc.stdin.flush()
        except (OSError, ValueError):
            pass

    def kill(self) -> None:
        """SIGKILL to the server's process group, then wait until no member is left running (bwrap's
        init in the sandbox belongs to it; once killed it stays a zombie until whoever inherits it
        reaps it, which on some hosts' init is late: a zombie runs nothing, so it counts as gone)."""
        self.dead = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        end = time.monotonic() + KILL_WAIT_S
        while time.monotonic() < end and group_running(self.proc.pid):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                break
            time.sleep(0.02)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


def group_running(pgid: int) -> bool:
    """Whether a process of group `pgid` is still running (zombies, which run nothing, are not)."""
    for proc in psutil.process_iter(["status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) == pgid:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


def _settle_from_thread(loop: asyncio.AbstractEventLoop, fut: asyncio.Future, answer, exc) -> None:
    try:
        loop.call_soon_threadsafe(_settle, fut, answer, exc)
    except RuntimeError:
        pass        # its loop is closed (a grading given up, e.g. timed out): nobody waits for it


def _settle(fut: asyncio.Future, answer, exc) -> None:
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(answer)


def _readline_within(proc: subprocess.Popen, timeout_s: float) -> bytes:
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    return out[0] if out else b""


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1] if lines else "no output"


class _Pool:
    """Live servers by key, each shared by every grading of its key, any number at once (the
    engine's grading queue decides how many run together). A grading takes one (or starts one, or
    waits for the one starting) and gives it back when done; a server nobody uses is idle."""

    def __init__(self):
        self._lock = threading.Lock()
        self._servers: dict[ServerKey, list[GraderServer]] = {}
        self._starting: dict[ServerKey, Future] = {}     # being started, not yet live
        self._sweeper: threading.Thread | None = None

    def _sweep(self) -> None:
        while True:
            time.sleep(IDLE_S / 4)
            now = time.monotonic()
            with self._lock:
                old = [s for ss in self._servers.values() for s in ss if not s.users and now - s.last_used > IDLE_S]
                for s in old:
                    self._servers[s.key].remove(s)
            for s in old:
                s.kill()

    def _live(self, key: ServerKey) -> GraderServer | None:
        """A live server of key (under the lock); dead ones are dropped."""
        servers = self._servers.get(key, [])
        for server in list(servers):
            if server.dead or server.proc.poll() is not None:
                servers.remove(server)
                threading.Thread(target=server.kill, daemon=True).start()
            else:
                return server
        return None

    def _start(self, key: ServerKey, env: dict) -> Future:
        """Under the lock: the start of key's server (one at a time per key); it joins the live ones
        when ready."""
        future = self._starting.get(key)
        if future is not None:
            return future
        future = _SPAWNER.submit(GraderServer.start, key, env)
        self._starting[key] = future

        def ready(fut: Future) -> None:
            with self._lock:
                if self._starting.get(key) is fut:
                    del self._starting[key]
                if fut.exception() is None and fut.result() not in self._servers.setdefault(key, []):
                    fut.result().last_used = time.monotonic()
                    self._servers[key].append(fut.result())
                self._start_sweeper()
        future.add_done_callback(ready)
        return future

    def take_live(self, key: ServerKey) -> GraderServer | None:
        """key's live server, taken, or None when none is live (then `take`, which may wait for a
        start, from a thread): the usual case, a server up, costs no thread hand-off."""
        with self._lock:
            server = self._live(key)
            if server is not None:
                server.users += 1
            return server

    def take(self, key: ServerKey, env: dict) -> GraderServer:
        for _ in range(2):       # a server that died while starting: one more start
            with self._lock:
                server = self._live(key)
                if server is not None:
                    server.users += 1
                    return server
                starting = self._start(key, env)
            server = starting.result()     # ServerGone/OSError: the caller takes the cold path
            with self._lock:
                if server not in self._servers.setdefault(key, []):
                    self._servers[key].append(server)
                if not server.dead and server.proc.poll() is None:
                    server.users += 1
                    return server
        raise ServerGone("the warm grader died as it started")

    def prestart(self, key: ServerKey, env: dict) -> None:
        """Start a server for key in the background unless one is live or starting."""
        with self._lock:
            if self._live(key) is None:
                self._start(key, env)

    def _start_sweeper(self) -> None:
        if self._sweeper is None:
            self._sweeper = threading.Thread(target=self._sweep, daemon=True, name="warm-grader-sweep")
            self._sweeper.start()

    def give_back(self, server: GraderServer) -> None:
        server.last_used = time.monotonic()
        extra: list[GraderServer] = []
        with self._lock:
            server.users = max(0, server.users - 1)
            self._start_sweeper()
            if server.dead or server.proc.poll() is not None:
                if server in self._servers.get(server.key, []):
                    self._servers[server.key].remove(server)
                extra.append(server)
            idle = sorted((s for ss in self._servers.values() for s in ss if not s.users), key=lambda s: s.last_used)
            for old in idle[: max(0, len(idle) - MAX_IDLE_SERVERS)]:
                self._servers[old.key].remove(old)
                extra.append(old)
        for old in extra:
            old.kill()

    def idle(self) -> list[GraderServer]:
        with self._lock:
            return [s for ss in self._servers.values() for s in ss if not s.users]

    def live(self) -> list[GraderServer]:
        with self._lock:
            return [s for ss in self._servers.values() for s in ss]

    def close(self, grading_root: Path | None = None) -> None:
        """Stop the servers (of one grading folder, or all), and those still starting."""
        with self._lock:
            doomed = [s for k, ss in self._servers.items() for s in ss
                      if grading_root is None or k.grading_root == Path(grading_root)]
            for s in doomed:
                self._servers[s.key].remove(s)
            starting = [self._starting.pop(k) for k in list(self._starting)
                        if grading_root is None or k.grading_root == Path(grading_root)]
        for s in doomed:
            s.kill()
        for fut in starting:
            fut.add_done_callback(lambda f: f.exception() is None and f.result().kill())


POOL = _Pool()
# Servers are started from this one thread, which lives as long as the process: bwrap's
# --die-with-parent fires when the *thread* that started it ends (an asyncio.to_thread worker
# would take the server with it when its event loop closes).
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="warm-grader-start")


def close_all() -> None:
    """The engine's stop, and a run's end: no server outlives its owner."""
    POOL.close()


def task_data_env(request: dict) -> list[str]:
    """The environment variables the graded task's card names as its grader's data folders
    (`data.grader_env`, e.g. ALFWorld's games): passed to the worker, their folders bound read-only."""
    names = ((request.get("task") or {}).get("data") or {}).get("grader_env") or []
    return [str(n) for n in ([names] if isinstance(names, str) else names)]


def task_data_folders(request: dict) -> tuple[Path, ...]:
    """The existing folders those variables name in the engine's environment."""
    return tuple(Path(os.environ[n]) for n in task_data_env(request)
                 if os.environ.get(n) and os.path.isdir(os.environ[n]))


def server_key(request: dict, work_dir: Path, gpus: list[str] | None, threads: int, python: str | None,
               grading_root: Path | None = None) -> ServerKey:
    """The server a grading in work_dir uses: that of its grading folder (`grading_root`, an
    ancestor of work_dir; else work_dir's parent), devices, threads and task folder. A built-in
    task's folder lies in the package, which every server sees: those tasks share one server."""
    task_dir = (request.get("task") or {}).get("dir")
    package = Path(__file__).resolve().parents[1]
    if task_dir and Path(task_dir).resolve().is_relative_to(package):
        task_dir = None
    # Only folders that exist now: the sandbox binds no missing path, so a server started before the
    # data was made (a prestart while the run prepares) must not serve a grading that needs it.
    extra = task_data_folders(request)
    root = Path(os.path.abspath(grading_root)) if grading_root else Path(os.path.abspath(work_dir)).parent
    return ServerKey(grading_root=root, task_dir=Path(task_dir) if task_dir else None,
                     gpus=tuple(gpus or ()), threads=int(threads), python=python or sys.executable, extra_ro=extra)

"""The warm grader: long-lived grading servers (`grading/warm_server.py`) owned by the engine, one
per grading folder and device group, each forking one sandboxed child per grading. The child
still runs as a uid leased for that grading alone, with the same rlimits and the same sandboxed
view as the cold worker; the server saves what every cold worker paid again: starting Python,
importing torch and transformers, loading the model code, and the interpreter's shutdown.

What the server sees (fixed when it starts): the system, the Python runtime, the package, the
task folder (read-only) and the grading folder (read-write: the parent of every grading's work
dir). That folder is root-owned 0711; each grading's work dir is given to its uid with mode 0700
and gets hard links to the model and the split (`input/`), removed afterwards, when the work dir
goes back to root (0700). A grading cannot list or read another grading's folder, an earlier
grading's results included, whichever uid it had.

A grading that hangs or is cancelled kills its whole server (the next grading starts a fresh
one); a grading that crashes ends only its child. Gradings are never queued inside a server: a
busy server means another one is started, so no grading can be lost with one.
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
IDLE_SERVERS_PER_KEY = 1
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

    @classmethod
    def start(cls, key: ServerKey, env: dict) -> "GraderServer":
        from autorl_tui.engine.executors.sandbox_bwrap import Sandbox

        package = Path(__file__).resolve().parents[1]
        ro = [package, *key.extra_ro] + ([key.task_dir] if key.task_dir else [])
        sandbox = Sandbox(uid=0, chdir=key.grading_root, ro=ro, rw=[key.grading_root], gpus=list(key.gpus),
                          keep_caps=SERVER_CAPS)
        argv = sandbox.argv([key.python, "-m", SERVER_MODULE])
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

    def submit(self, job: dict) -> asyncio.Future:
        """Send one grading; the future gets the server's answer, {"status": the child's exit
        status, "stamps": {...}} (or ServerGone)."""
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
        return fut

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
    """Idle servers by key. A grading takes one (or starts one) and gives it back when done."""

    def __init__(self):
        self._lock = threading.Lock()
        self._idle: dict[ServerKey, list[GraderServer]] = {}
        self._starting: dict[ServerKey, Future] = {}     # prestarted, not yet idle nor taken
        self._sweeper: threading.Thread | None = None

    def _sweep(self) -> None:
        while True:
            time.sleep(IDLE_S / 4)
            now = time.monotonic()
            with self._lock:
                old = [s for ss in self._idle.values() for s in ss if now - s.last_used > IDLE_S]
                for s in old:
                    self._idle[s.key].remove(s)
            for s in old:
                s.kill()

    def take(self, key: ServerKey, env: dict) -> GraderServer:
        with self._lock:
            idle = self._idle.get(key, [])
            while idle:
                server = idle.pop()
                if not server.dead and server.proc.poll() is None:
                    return server
                server.kill()
            starting = self._starting.pop(key, None)
        if starting is not None:          # prestarted for this grading: wait for it rather than start another
            try:
                server = starting.result()
                if not server.dead and server.proc.poll() is None:
                    return server
                server.kill()
            except (ServerGone, OSError):
                pass
        return _SPAWNER.submit(GraderServer.start, key, env).result()

    def prestart(self, key: ServerKey, env: dict) -> None:
        """Start a server for key in the background unless one is idle or starting: it joins the
        idle ones when ready, or goes to the grading that asks for it meanwhile."""
        with self._lock:
            if self._idle.get(key) or key in self._starting:
                return
            future = _SPAWNER.submit(GraderServer.start, key, env)
            self._starting[key] = future

        def ready(fut: Future) -> None:
            with self._lock:
                unclaimed = self._starting.get(key) is fut
                if unclaimed:
                    del self._starting[key]
            if unclaimed and fut.exception() is None:
                self.give_back(fut.result())
        future.add_done_callback(ready)

    def give_back(self, server: GraderServer) -> None:
        if server.dead or server.proc.poll() is not None:
            server.kill()
            return
        server.last_used = time.monotonic()
        extra: list[GraderServer] = []
        with self._lock:
            if self._sweeper is None:
                self._sweeper = threading.Thread(target=self._sweep, daemon=True, name="warm-grader-sweep")
                self._sweeper.start()
            idle = self._idle.setdefault(server.key, [])
            idle.append(server)
            if len(idle) > IDLE_SERVERS_PER_KEY:
                extra.append(idle.pop(0))
            everyone = sorted((s for ss in self._idle.values() for s in ss), key=lambda s: s.last_used)
            for old in everyone[: max(0, len(everyone) - MAX_IDLE_SERVERS)]:
                self._idle[old.key].remove(old)
                extra.append(old)
        for old in extra:
            old.kill()

    def idle(self) -> list[GraderServer]:
        with self._lock:
            return [s for ss in self._idle.values() for s in ss]

    def close(self, grading_root: Path | None = None) -> None:
        """Stop idle servers (of one grading folder, or all), and those still starting."""
        with self._lock:
            doomed = [s for k, ss in self._idle.items() for s in ss
                      if grading_root is None or k.grading_root == Path(grading_root)]
            for s in doomed:
                self._idle[s.key].remove(s)
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


def server_key(request: dict, work_dir: Path, gpus: list[str] | None, threads: int, python: str | None) -> ServerKey:
    task_dir = (request.get("task") or {}).get("dir")
    # Only folders that exist now: the sandbox binds no missing path, so a server started before the
    # data was made (a prestart while the run prepares) must not serve a grading that needs it.
    extra = tuple(Path(p) for p in [os.environ.get("ALFWORLD_DATA")] if p and os.path.isdir(p))
    return ServerKey(grading_root=Path(os.path.abspath(work_dir)).parent, task_dir=Path(task_dir) if task_dir else None,
                     gpus=tuple(gpus or ()), threads=int(threads), python=python or sys.executable, extra_ro=extra)

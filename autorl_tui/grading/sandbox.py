"""Run untrusted generated code (HumanEval completions, ...) in a contained separate process.

What contains it (each part is probed once per `Sandbox`; when one is unavailable the sandbox
falls back and records why in `Sandbox.isolation`, which scorers put into their metrics):

- **no network**: each program runs in an empty network namespace of its own (only a loopback
  device, which is down), so even 127.0.0.1 is unreachable and two programs graded at once
  share no loopback and no abstract unix socket. The runner (root in its namespaces) creates it
  with `unshare(CLONE_NEWNET)` right before dropping to the program's uid; a program whose
  namespace cannot be made does not run. The `Sandbox`'s own empty namespace (made once, kept
  alive by an open fd) is where runners and fork servers live.
- **pid namespace** (`unshare --pid --fork --kill-child`): the program's processes, including
  any that called `setsid`, die when the sandbox's init dies; killing the `unshare` process
  group at the wall-time limit kills everything.
- **private temp folders** (mount namespace): fresh tmpfs over /tmp, /var/tmp, /dev/shm and
  /run/lock; the work dir lives there, and writes anywhere else fail (permissions) or vanish.
- **unprivileged uid** (when the harness is root): the program runs as a uid no one else uses
  (one per concurrent slot), so RLIMIT_NPROC counts only its own processes (a fork bomb cannot
  exhaust the harness's) and root-owned 0600/0700 files (the store, held-out data) are unreadable.
- **resource limits**: RLIMIT_CPU (SIGXCPU, then SIGKILL), RLIMIT_AS (allocations fail with
  MemoryError), RLIMIT_FSIZE, RLIMIT_NPROC, RLIMIT_NOFILE, no core files; a wall-time limit.
- **minimal environment**: PATH, HOME (the work dir), LANG, PYTHONHASHSEED=0; `python -s -S`
  (no site-packages, no user site); a fixed hash seed keeps results reproducible.

- **fork server** (when all of the above are available): each worker slot keeps one runner
  alive as pid 1 of its own namespaces, with common modules imported, and forks one child per
  program; fresh tmpfs folders before each program, and every process of the slot's uid killed
  and reaped after it. This saves the interpreter start (several times more executions/s). A
  server that stops answering is killed and replaced. `forkserver=False` starts one interpreter
  per program instead (also the fallback when a namespace or the uid switch is unavailable).
- setuid binaries cannot raise privileges (PR_SET_NO_NEW_PRIVS).

Output beyond `output_bytes` per stream is read and discarded (the outcome says it was truncated).
A program passes only when it ran to its end: the runner then writes a nonce the program never
sees in argv or the environment, so `sys.exit(0)`/`os._exit(0)` before the tests cannot pass.
That "ran to its end" is all a program's own process can vouch for: a program can read the
runner's frames (the nonce too). Scoring must not rest on it: code scoring runs the tests in the
harness and only talks to the program over a channel (`run(..., channel=sock)`, fd 4 in the
program; see grading/code_protocol.py).

- **hidden paths** (`hide=`, needs the mount namespace): files and folders covered in the
  sandbox's view (test data readable by every uid on the host, e.g. a package's bundled data).
"""

from __future__ import annotations

import functools
import marshal
import os
import queue
import secrets
import select
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from autorl_tui.grading.sandbox_identity import identity_env

RUNNER = Path(__file__).with_name("_sandbox_runner.py")
# No site-packages, no user site, no .pyc writing. Not -I/-E: the runner's environment is ours
# alone (RUNNER_ENV) and must carry a fixed hash seed, so set iteration order (and with it some
# programs' output) is the same on every run: same protocol, same numbers.
PYTHON_FLAGS = ("-s", "-S", "-B")
RUNNER_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}
# The one package beyond the stdlib that programs may import (HumanEval solutions use it and the
# official harness lets them): the runner finds it in its own folder, and nothing else of
# site-packages (_sandbox_runner.py, AUTORL_SANDBOX_PACKAGES).
SANDBOX_PACKAGES = ("numpy",)


def _package_dirs() -> str:
    import importlib.util

    found = []
    for name in SANDBOX_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            found.append(f"{name}={os.path.dirname(list(spec.submodule_search_locations)[0])}")
    return os.pathsep.join(found)


RUNNER_ENV["AUTORL_SANDBOX_PACKAGES"] = _package_dirs()
SANDBOX_HOME = "/tmp/sandbox"            # the work dir inside the private /tmp
PRIVATE_TMP = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")   # fresh tmpfs per program (the runner's PRIVATE_TMPFS)

# Reasons a run did not pass. Scorers map them onto grading.types.FAILURE_KINDS.
REASONS = ("timeout", "cpu_time", "memory", "syntax_error", "runtime_error", "exited", "killed",
           "no_result", "sandbox_error")


@dataclass
class SandboxLimits:
    wall_s: float = 10.0
    cpu_s: int = 10
    memory_mb: int = 1024
    file_size_mb: int = 16
    nproc: int = 32
    nofile: int = 64
    output_bytes: int = 64 * 1024
    tmpfs_mb: int = 64

    @classmethod
    def from_dict(cls, data: dict | None) -> "SandboxLimits":
        data = dict(data or {})
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"unknown sandbox limit(s) {unknown}; known: {sorted(cls.__dataclass_fields__)}")
        return cls(**data)


@dataclass
class SandboxOutcome:
    passed: bool
    reason: str | None = None            # one of REASONS when not passed
    error: str | None = None             # exception line ("AssertionError: ...") or what happened
    error_type: str | None = None        # exception class name when one was raised
    lineno: int | None = None            # where in the program it was raised
    line: str | None = None              # that source line
    exit_code: int | None = None
    signal: int | None = None
    stdout: str = ""
    stderr: str = ""
    output_truncated: bool = False
    duration_s: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


@functools.lru_cache(maxsize=None)   # the answer does not change while the process lives
def _probe_unshare(flags: tuple[str, ...]) -> str | None:
    """None when `unshare FLAGS true` works here, else why not."""
    exe = shutil.which("unshare")
    if exe is None:
        return "the unshare command is not installed (util-linux)"
    try:
        proc = subprocess.run([exe, *flags, "true"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare {' '.join(flags)} failed: {exc}"
    if proc.returncode != 0:
        return f"unshare {' '.join(flags)} failed: {proc.stderr.strip() or proc.returncode}"
    return None


class Sandbox:
    """Runs Python programs contained; thread-safe, `run_many` runs them concurrently."""

    def __init__(self, limits: SandboxLimits | None = None, *, python: str | None = None,
                 uid_base: int | None = None, workers: int = 2, base_dir: Path | None = None,
                 isolate: bool = True, forkserver: bool = True, hide: list | tuple = (),
                 uids: list[int] | None = None):
        self.limits = limits or SandboxLimits()
        self.hide = _hideable(hide)
        self.hidden_by_tmp = _under_private_tmp(hide)    # a fresh tmpfs covers them already
        self.workers = max(1, int(workers))
        self.base_dir = Path(base_dir) if base_dir else None
        self.isolation: dict[str, str] = {}
        self._netns_fd: int | None = None
        self._forkservers: dict[int, _ForkServer] = {}
        self._fs_lock = threading.Lock()
        self._closed = False
        is_root = os.geteuid() == 0
        self.use_pidns = self.use_mountns = False
        if isolate and is_root:
            why = _probe_unshare(("--pid", "--fork", "--kill-child", "--mount-proc"))
            self.use_pidns = self.use_mountns = why is None
            self.isolation["pid_namespace"] = "yes" if why is None else f"no: {why}"
            self.isolation["private_tmp"] = "yes" if why is None else f"no: {why}"
            self._netns_fd, why = self._make_netns()
            self.isolation["network"] = ("none (an empty network namespace per program)" if why is None
                                         else f"host network: {why}")
        else:
            why = "disabled (isolate=False)" if not isolate else "the harness is not root"
            for key in ("pid_namespace", "private_tmp"):
                self.isolation[key] = f"no: {why}"
            self.isolation["network"] = f"host network: {why}"
        # Per-process uid range so that concurrent graders' fork bombs do not share an NPROC count.
        if is_root and isolate and uids:    # leased by the caller (grading/sandbox_remote.py)
            self.workers = len(uids)
            self._uids = list(uids)
            self.isolation["uid"] = f"leased unprivileged uids {', '.join(map(str, self._uids))}"
        elif is_root and isolate:
            base = uid_base if uid_base is not None else 200000 + (os.getpid() % 100000) * 16
            self._uids = [base + i for i in range(self.workers)]
            self.isolation["uid"] = f"unprivileged uids {self._uids[0]}..{self._uids[-1]}"
        else:
            self._uids = [None] * self.workers
            self.isolation["uid"] = f"same uid as the harness ({os.geteuid()}): " + (
                "isolate=False" if not isolate else "not root, cannot switch; RLIMIT_NPROC counts the harness's processes too")
        self._free: queue.Queue[int] = queue.Queue()
        for slot in range(self.workers):
            self._free.put(slot)
        self.use_forkserver = False
        self.python = python or self._pick_python()
        self.isolation["python"] = self.python
        hidden = [*self.hide, *(f"{p} (under a private tmpfs)" for p in self.hidden_by_tmp)]
        if hidden:
            self.isolation["hidden_paths"] = (", ".join(hidden) if self.use_mountns else
                                              f"NOT hidden (no mount namespace): {', '.join(hidden)}")
        # The fork server needs everything the one-shot mode has (it kills escapees by uid, inside
        # its own pid namespace); otherwise each program starts its own interpreter.
        if not forkserver:
            self.isolation["mode"] = "one interpreter per program (forkserver=False)"
        elif self.use_pidns and self.use_mountns and self._netns_fd is not None and self._uids[0] is not None:
            self.use_forkserver = True
            probe = self._probe()
            if not probe.passed:
                self.use_forkserver = False
                self._stop_forkservers()
                self.isolation["mode"] = f"one interpreter per program (fork server failed: {probe.reason} {probe.error})"
            else:
                self.isolation["mode"] = "fork server per worker (preloaded interpreter, one fork per program)"
        else:
            self.isolation["mode"] = "one interpreter per program"

    # ------------------------------------------------------------------ set-up
    def _make_netns(self) -> tuple[int | None, str | None]:
        why = _probe_unshare(("--net",))
        if why:
            return None, why
        holder = subprocess.Popen([shutil.which("unshare"), "--net", "--", "cat"], stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            path = f"/proc/{holder.pid}/ns/net"
            deadline = time.monotonic() + 5
            while True:  # wait until `cat` runs in the new namespace (differs from ours)
                try:
                    if os.readlink(path) != os.readlink("/proc/self/ns/net"):
                        return os.open(path, os.O_RDONLY), None
                except OSError:
                    pass
                if holder.poll() is not None or time.monotonic() > deadline:
                    return None, f"could not create a network namespace ({holder.stderr.read().decode().strip()})"
                time.sleep(0.002)
        finally:
            holder.stdin.close()
            holder.wait()

    def _pick_python(self) -> str:
        """An interpreter whose standard library the sandbox uid can read."""
        candidates = [os.path.realpath(sys.executable), "/usr/bin/python3", shutil.which("python3")]
        tried = []
        for exe in dict.fromkeys(c for c in candidates if c):
            self.python = exe
            out = self._probe()
            if out.reason == "sandbox_error" and self.use_mountns:
                # e.g. a container where mounting tmpfs is not allowed: keep the rest, say what is lost
                self.use_mountns = False
                self.isolation["private_tmp"] = f"no: {out.error}"
                out = self._probe()
            if out.passed:
                return exe
            tried.append(f"{exe}: {out.reason} {out.error}")
        raise RuntimeError("no Python interpreter works inside the sandbox (its standard library must be readable by "
                           "the sandbox uid; install python3 system-wide or pass python=...): " + "; ".join(tried))

    def _probe(self) -> SandboxOutcome:
        return self.run("import json, math, re, hashlib, collections, itertools, fractions, heapq, typing\n", wall_s=20)

    def _stop_forkservers(self) -> None:
        with self._fs_lock:
            servers, self._forkservers = list(self._forkservers.values()), {}
        for server in servers:
            server.close()

    def close(self) -> None:
        self._stop_forkservers()
        if self._netns_fd is not None:
            os.close(self._netns_fd)
            self._netns_fd = None
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ running
    def run_many(self, programs: list[str], **overrides) -> list[SandboxOutcome]:
        if self.workers == 1 or len(programs) <= 1:
            return [self.run(p, **overrides) for p in programs]
        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(lambda p: self.run(p, **overrides), programs))

    def run(self, program: str, *, channel: socket.socket | None = None, **overrides) -> SandboxOutcome:
        """Run one program. overrides: SandboxLimits fields for this run only.

        channel: one end of a socket pair; the program gets it as fd 4. `run` takes it over (it is
        closed here once the program has it), so the other end sees EOF when the program is gone."""
        if self._closed:   # its network namespace is gone: running now would mean running with the host's network
            if channel is not None:
                channel.close()
            raise RuntimeError("this Sandbox is closed; create a new one")
        limits = SandboxLimits(**{**asdict(self.limits), **overrides})
        slot = self._free.get()   # a uid serves one program at a time (the fork server kills by uid)
        try:
            if self.use_forkserver:
                return self._run_forkserver(slot, program, limits, channel)
            return self._run(program, limits, self._uids[slot], channel)
        finally:
            if channel is not None:
                channel.close()
            self._free.put(slot)

    def _run_forkserver(self, slot: int, program: str, limits: SandboxLimits,
                        channel: socket.socket | None = None) -> SandboxOutcome:
        t0 = time.monotonic()
        with self._fs_lock:
            server = self._forkservers.get(slot)
        if server is None or not server.alive():
            try:
                server = _ForkServer(self, self._uids[slot])
            except OSError as exc:
                return SandboxOutcome(False, "sandbox_error", f"could not start the fork server: {exc}",
                                      duration_s=time.monotonic() - t0)
            with self._fs_lock:
                self._forkservers[slot] = server
        nonce = secrets.token_hex(16)
        req = {"program": program, "nonce": nonce, "wall_s": limits.wall_s, "output_bytes": limits.output_bytes,
               "tmpfs_size": f"{limits.tmpfs_mb}m", "limits": _rlimits(limits), "new_netns": True}
        if channel is not None:
            req["channel"] = True
            try:
                socket.send_fds(server.fd_sock, [b"c"], [channel.fileno()])
            except OSError:
                req = None
            channel.close()
        reply = server.request(req, timeout=limits.wall_s + 10) if req is not None else None
        if reply is None or "setup_error" in reply:
            server.close()     # a stuck or broken server is replaced on the next run
            with self._fs_lock:
                if self._forkservers.get(slot) is server:
                    del self._forkservers[slot]
            why = reply["setup_error"] if reply else "the fork server did not answer; it was killed"
            return SandboxOutcome(False, "sandbox_error", f"sandbox failure: {why}", duration_s=time.monotonic() - t0)
        out = SandboxOutcome(passed=False, stdout=reply["stdout"].decode(errors="replace"),
                             stderr=reply["stderr"].decode(errors="replace"), output_truncated=reply["truncated"],
                             duration_s=time.monotonic() - t0)
        records = _parse_records(reply["status"]) + [reply["exited"]]
        _interpret(out, records, nonce, reply["timed_out"], None, limits)
        if not reply.get("clean"):   # processes of the uid survived the kill loop: do not reuse this server
            server.close()
            with self._fs_lock:
                self._forkservers.pop(slot, None)
        return out

    def _run(self, program: str, limits: SandboxLimits, uid: int | None,
             channel: socket.socket | None = None) -> SandboxOutcome:
        t0 = time.monotonic()
        host_workdir = None
        if self.use_mountns:
            workdir = SANDBOX_HOME
        else:
            host_workdir = tempfile.mkdtemp(prefix="autorl-sandbox-", dir=self.base_dir)
            workdir = host_workdir
        nonce = secrets.token_hex(16)
        status_r, status_w = os.pipe()
        pass_fds = [status_w]
        req = {"program": program, "nonce": nonce, "status_fd": status_w, "workdir": workdir,
               "private_tmp": self.use_mountns, "tmpfs_size": f"{limits.tmpfs_mb}m",
               "uid": uid, "gid": uid,
               "env": _minimal_env(workdir),
               "limits": _rlimits(limits), "hide": list(self.hide)}
        if channel is not None:
            req["channel_fd"] = channel.fileno()
            pass_fds.append(channel.fileno())
        if self._netns_fd is not None:
            req["netns_fd"] = self._netns_fd
            req["new_netns"] = True
            pass_fds.append(self._netns_fd)
        cmd = [self.python, *PYTHON_FLAGS, str(RUNNER)]
        if self.use_pidns:
            cmd = [shutil.which("unshare"), "--pid", "--fork", "--kill-child", "--mount-proc", "--", *cmd]
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    pass_fds=pass_fds, start_new_session=True, cwd="/",
                                    env=dict(RUNNER_ENV))
        except OSError as exc:
            os.close(status_r)
            os.close(status_w)
            return SandboxOutcome(False, "sandbox_error", f"could not start the sandbox: {exc}",
                                  duration_s=time.monotonic() - t0)
        os.close(status_w)
        if channel is not None:
            channel.close()
        try:
            return self._collect(proc, marshal.dumps(req), status_r, nonce, limits, t0)
        finally:
            os.close(status_r)
            if host_workdir:
                shutil.rmtree(host_workdir, ignore_errors=True)

    def _collect(self, proc, payload: bytes, status_r: int, nonce: str, limits: SandboxLimits,
                 t0: float) -> SandboxOutcome:
        deadline = t0 + limits.wall_s
        bufs = {"stdout": bytearray(), "stderr": bytearray(), "status": bytearray()}
        truncated = False
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
        sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
        sel.register(status_r, selectors.EVENT_READ, "status")
        # The request is small next to the pipe buffer for typical programs; write it in a thread so
        # a huge program cannot deadlock against a runner that has not started reading yet.
        writer = threading.Thread(target=_write_all, args=(proc.stdin, payload), daemon=True)
        writer.start()
        timed_out = False
        open_streams = 3
        ended_at = None
        while open_streams:
            now = time.monotonic()
            remaining = deadline - now
            if remaining <= 0:
                timed_out = True
                break
            # Without a pid namespace, escaped grandchildren may hold the pipes open after the
            # program ended: give them a moment, then stop reading (and kill the group).
            if ended_at is None and proc.poll() is not None:
                ended_at = now
            if ended_at is not None and now - ended_at > 0.5:
                break
            for key, _ in sel.select(timeout=min(remaining, 0.1 if ended_at else 1.0)):
                fd = key.fd
                chunk = os.read(fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    open_streams -= 1
                    continue
                buf = bufs[key.data]
                room = (limits.output_bytes if key.data != "status" else 1 << 20) - len(buf)
                if len(chunk) > room and key.data != "status":
                    truncated = True      # keep reading (and discarding) so the program never blocks on a full pipe
                if room > 0:
                    buf += chunk[:room]
        sel.close()
        if timed_out or proc.poll() is None:
            _kill_group(proc)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.wait()
        writer.join(timeout=1)
        out = SandboxOutcome(passed=False, stdout=bufs["stdout"].decode(errors="replace"),
                             stderr=bufs["stderr"].decode(errors="replace"), output_truncated=truncated,
                             duration_s=time.monotonic() - t0)
        records = _parse_records(bytes(bufs["status"]))
        _interpret(out, records, nonce, timed_out, proc.returncode, limits)
        return out


def _hideable(paths) -> tuple[str, ...]:
    """Absolute existing paths to hide, never one holding the interpreter's standard library, and
    none in or above the private temp folders (fresh and empty for each program anyway)."""
    needed = [os.path.realpath(p) for p in (sysconfig.get_paths()["stdlib"], sys.base_prefix, sys.executable)]

    def within(inner: str, outer: str) -> bool:
        return inner == outer or inner.startswith(outer.rstrip("/") + "/")

    out = []
    for path in paths:
        real = os.path.realpath(str(path))
        if not os.path.exists(real) or any(within(n, real) for n in needed) \
                or any(within(real, t) or within(t, real) for t in PRIVATE_TMP):
            continue
        out.append(real)
    return tuple(dict.fromkeys(out))


def _under_private_tmp(paths) -> tuple[str, ...]:
    """Existing paths to hide that lie inside a private temp folder (e.g. a checkout under /tmp)."""
    out = []
    for path in paths or ():
        real = os.path.realpath(str(path))
        if os.path.exists(real) and any(real.startswith(t + "/") for t in PRIVATE_TMP):
            out.append(real)
    return tuple(dict.fromkeys(out))


def _rlimits(limits: SandboxLimits) -> dict:
    return {"cpu_s": limits.cpu_s, "memory_bytes": limits.memory_mb * 2**20,
            "file_size_bytes": limits.file_size_mb * 2**20, "nproc": limits.nproc, "nofile": limits.nofile}


def _minimal_env(workdir: str) -> dict:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", **identity_env(workdir), "LANG": "C.UTF-8",
            "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


class _ForkServer:
    """One long-lived runner (`--serve`) in its own pid and mount namespaces, for one uid."""

    def __init__(self, sandbox: Sandbox, uid: int):
        cmd = [shutil.which("unshare"), "--pid", "--fork", "--kill-child", "--mount-proc", "--",
               sandbox.python, *PYTHON_FLAGS, str(RUNNER), "--serve"]
        # Channels to programs travel to the server as fds over this socket (SCM_RIGHTS).
        self.fd_sock, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         pass_fds=[sandbox._netns_fd, server_end.fileno()], start_new_session=True,
                                         cwd="/", env=dict(RUNNER_ENV))
        finally:
            server_end_fd = server_end.fileno()
            server_end.close()
        self._send({"netns_fd": sandbox._netns_fd, "uid": uid, "gid": uid, "workdir": SANDBOX_HOME,
                    "env": _minimal_env(SANDBOX_HOME), "fd_sock": server_end_fd, "hide": list(sandbox.hide)})
        ready = self._recv(time.monotonic() + 30)
        if not ready or ready.get("event") != "ready":
            self.close()
            raise OSError(f"fork server did not start: {ready}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(self, req: dict, timeout: float) -> dict | None:
        try:
            self._send(req)
        except OSError:
            return None
        return self._recv(time.monotonic() + timeout)

    def _send(self, obj) -> None:
        data = marshal.dumps(obj)
        self.proc.stdin.write(len(data).to_bytes(4, "big") + data)
        self.proc.stdin.flush()

    def _recv(self, deadline: float) -> dict | None:
        fd = self.proc.stdout.fileno()
        buf = bytearray()
        need = 4
        size = None
        while len(buf) < need:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(fd, max(65536, need - len(buf)))
            if not chunk:
                return None
            buf += chunk
            if size is None and len(buf) >= 4:
                size = int.from_bytes(buf[:4], "big")
                need = 4 + size
        try:
            return marshal.loads(bytes(buf[4:need]))
        except (ValueError, EOFError, TypeError):
            return None

    def close(self) -> None:
        _kill_group(self.proc)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.fd_sock.close()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


def _parse_records(data: bytes) -> list[dict]:
    """Length-prefixed marshal records; stops at the first malformed one (the program may scribble)."""
    records, pos = [], 0
    while pos + 4 <= len(data):
        size = int.from_bytes(data[pos:pos + 4], "big")
        chunk = data[pos + 4:pos + 4 + size]
        if len(chunk) < size:
            break
        try:
            rec = marshal.loads(chunk)
        except (ValueError, EOFError, TypeError):
            break
        if isinstance(rec, dict):
            records.append(rec)
        pos += 4 + size
    return records


def _write_all(stream, payload: bytes) -> None:
    try:
        stream.write(payload)
        stream.close()
    except (BrokenPipeError, OSError, ValueError):
        pass


def _kill_group(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _interpret(out: SandboxOutcome, records: list[dict], nonce: str, timed_out: bool,
               returncode: int | None, limits: SandboxLimits) -> None:
    exited = [r for r in records if r.get("event") == "exited"]
    last_exit = exited[-1] if exited else {}
    out.exit_code = last_exit.get("code")
    out.signal = last_exit.get("signal")
    if any(r.get("event") == "ok" and r.get("nonce") == nonce for r in records) and not timed_out:
        out.passed = True
        return
    setup = next((r for r in records if r.get("event") == "setup_error"), None)
    err = next((r for r in records if r.get("event") in ("error", "syntax_error", "exit")), None)
    if timed_out:
        out.reason, out.error = "timeout", f"wall-time limit of {limits.wall_s:g} s exceeded; the process group was killed"
    elif setup is not None:
        out.reason, out.error = "sandbox_error", f"sandbox set-up failed: {setup.get('message')}"
    elif out.signal == signal.SIGXCPU and err is None:
        out.reason, out.error = "cpu_time", f"CPU-time limit of {limits.cpu_s} s exceeded (SIGXCPU)"
    elif err is not None:
        out.error_type = err.get("type")
        out.error = err.get("message")
        out.lineno, out.line = err.get("lineno"), err.get("line")
        if err["event"] == "syntax_error":
            out.reason = "syntax_error"
        elif err["event"] == "exit":
            out.reason = "exited"
            out.error = f"the program called exit({err.get('code')!r}) before finishing"
        elif err.get("type") == "MemoryError":
            out.reason = "memory"
            out.error = f"MemoryError: memory limit of {limits.memory_mb} MB exceeded"
        else:
            out.reason = "runtime_error"
    elif out.signal is not None:
        name = signal.Signals(out.signal).name if out.signal in signal.Signals._value2member_map_ else str(out.signal)
        if out.signal == signal.SIGKILL:
            out.reason, out.error = "killed", f"killed by {name} (CPU hard limit or out of memory)"
        else:
            out.reason, out.error = "killed", f"killed by signal {name}"
    elif out.exit_code is not None:
        out.reason = "exited"
        out.error = f"the program exited with status {out.exit_code} before finishing"
    else:
        out.reason = "no_result"
        out.error = f"the sandbox ended without a result (exit status {returncode})"
    if out.reason == "killed" and out.signal == signal.SIGXFSZ:
        out.error = f"file-size limit of {limits.file_size_mb} MB exceeded (SIGXFSZ)"

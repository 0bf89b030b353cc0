"""The engine's side of its Ray driver: a child process (`ray_driver.py`) the engine talks to over
a socket pair, one JSON line per call and per answer (docs/cluster.md, "The engine outlives the
cluster").

Ray ends a driver process whose head stays away (its GCS client exits the process after about
60 s): the driver is therefore not the engine. When the head goes down only the child is lost:
its calls fail with `ClusterUnreachable`, the next call starts a new child (after a backoff), and
that child connects again when the head answers. The engine probes the head's port itself
(`_reachable`) before each connect and ends a child whose head refuses connections, so a wedged
driver never holds a call for Ray's minute.

Thread-safe: calls return `concurrent.futures.Future`s resolved by a reader thread, so the
engine's event loop (`acall`) and its worker threads (`call_sync`) share one child."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from autorl_tui.executors.base import ExecutorError

DRIVER_MODULE = "autorl_tui.executors.ray_driver"
BACKOFF_FIRST_S = 1.0         # a child that died soon after its start is restarted after this...
BACKOFF_MAX_S = 30.0          # ...doubling up to this
STABLE_AFTER_S = 60.0         # a child that lived this long resets the backoff


class ClusterUnreachable(ExecutorError):
    """The cluster named is not answering now (its head is down, or unreachable from here, or the
    engine's driver process was lost with it): a Ray run waits for it rather than failing."""


class DriverError(ExecutorError):
    """A call the driver answered with an error; `kind` says which (ray_driver.error_kind)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _error(kind: str, message: str) -> Exception:
    from autorl_tui.exitcodes import UsageError

    if kind == "unreachable":
        return ClusterUnreachable(message)
    if kind == "usage":
        return UsageError(message)     # raised as is: plan validation's refusal
    return DriverError(kind, message)


class DriverProcess:
    """The child process that is the engine's Ray driver; started on the first call."""

    def __init__(self, log_path: Path | None = None):
        self.log_path = log_path
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._pending: dict[int, concurrent.futures.Future] = {}
        self._ids = itertools.count(1)
        self._started_at = 0.0
        self._not_before = 0.0
        self._backoff = BACKOFF_FIRST_S
        self.starts = 0                # children started so far (the tests read it)
        self.last_exit: str | None = None
        self.closed = False            # the engine stopped: no child is started any more

    # ---------------------------------------------------------------- the child
    def _spawn(self) -> None:
        if self.closed:
            raise ClusterUnreachable("the engine's Ray driver process was closed (the engine is stopping)")
        now = time.monotonic()
        if now < self._not_before:
            raise ClusterUnreachable(f"the engine's Ray driver process ended ({self.last_exit}); the next one "
                                     f"starts in {self._not_before - now:.0f} s")
        mine, theirs = socket.socketpair()
        # Ray's own output goes to a file in the home, never to the operator's terminal.
        log = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600) if self.log_path else None
        out = subprocess.DEVNULL if log is None else log
        try:
            self._proc = subprocess.Popen([sys.executable, "-m", DRIVER_MODULE, str(theirs.fileno())],
                                          pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=out, env=dict(os.environ), start_new_session=True)
        finally:
            theirs.close()
            if log is not None:
                os.close(log)
        self._sock, self._started_at = mine, now
        self.starts += 1
        threading.Thread(target=self._read, args=(self._proc, mine), name="ray-driver-reader", daemon=True).start()

    def _read(self, proc: subprocess.Popen, sock: socket.socket) -> None:
        try:
            with sock.makefile("rb") as lines:
                for line in lines:
                    answer = json.loads(line)
                    with self._lock:
                        future = self._pending.pop(answer["id"], None)
                    if future is None or future.done():
                        continue
                    if "error" in answer:
                        future.set_exception(_error(answer["error"]["kind"], answer["error"]["message"]))
                    else:
                        future.set_result(answer.get("result"))
        except (OSError, ValueError):
            pass
        self._lost(proc, sock)

    def _lost(self, proc: subprocess.Popen, sock: socket.socket, why: str | None = None) -> None:
        """The child ended (or is ended): every call it had fails ClusterUnreachable."""
        with self._lock:
            if self._proc is not proc:
                return
            self._proc, self._sock = None, None
            pending, self._pending = list(self._pending.values()), {}
            lived = time.monotonic() - self._started_at
            self._backoff = BACKOFF_FIRST_S if lived >= STABLE_AFTER_S else min(self._backoff * 2, BACKOFF_MAX_S)
        try:
            proc.kill()
        except OSError:
            pass
        code = proc.wait()
        try:
            sock.close()
        except OSError:
            pass
        self.last_exit = why or f"exit code {code}"
        self._not_before = time.monotonic() + (0 if why else self._backoff)
        for future in pending:
            if not future.done():
                future.set_exception(ClusterUnreachable(f"the engine's Ray driver process was lost "
                                                        f"({self.last_exit}): is the cluster's head down?"))

    def reset(self, why: str) -> None:
        """End the child (its head refuses connections: its driver is of no use any more)."""
        with self._lock:
            proc, sock = self._proc, self._sock
        if proc is not None and sock is not None:
            self._lost(proc, sock, why)

    @property
    def running(self) -> bool:
        return self._proc is not None

    # ---------------------------------------------------------------- calls
    def call(self, op: str, *args) -> concurrent.futures.Future:
        """Send one call; its answer resolves the future (ClusterUnreachable if the child is lost)."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._proc is None:
                try:
                    self._spawn()
                except ClusterUnreachable as exc:
                    future.set_exception(exc)
                    return future
            call_id = next(self._ids)
            future.call_id = call_id       # type: ignore[attr-defined]  # for cancel
            self._pending[call_id] = future
            sock = self._sock
        try:
            assert sock is not None
            sock.sendall(json.dumps({"id": call_id, "op": op, "args": list(args)}).encode() + b"\n")
        except OSError:
            with self._lock:
                self._pending.pop(call_id, None)
            future.set_exception(ClusterUnreachable("the engine's Ray driver process was lost"))
        return future

    def call_sync(self, op: str, *args, timeout: float | None = None):
        try:
            return self.call(op, *args).result(timeout)
        except concurrent.futures.TimeoutError:
            raise DriverError("timeout", f"the Ray driver did not answer {op} within {timeout:.0f} s") from None

    async def acall(self, op: str, *args, timeout: float | None = None):
        future = self.call(op, *args)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        except asyncio.TimeoutError:
            self.cancel(future)
            raise DriverError("timeout", f"the Ray driver did not answer {op} within {timeout:.0f} s") from None
        except asyncio.CancelledError:
            self.cancel(future)
            raise

    def cancel(self, future: concurrent.futures.Future) -> None:
        """Stop a call under way in the child (a grading that ran past its limit)."""
        call_id = getattr(future, "call_id", None)
        if call_id is not None and not future.done() and self.running:
            self.call("cancel", call_id)

    def close(self, timeout_s: float = 30.0) -> None:
        """The engine stops: the child ends its grading actors, then itself."""
        with self._lock:
            proc, sock = self._proc, self._sock
            self.closed = True
        if proc is None or sock is None:
            return
        try:
            self.call_sync("close", timeout=timeout_s)
        except ExecutorError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._lost(proc, sock, "closed")
        proc.wait()

"""Generated code run by a separate process: the grader worker asks, the code server runs.

The grader worker loads an untrusted model and holds the held-out tests, so it runs sandboxed as
an unprivileged uid with no capabilities (grading_host/grading_client.py). It cannot give generated code
a uid and namespaces of its own; the code server can: `python -m autorl_tui.grading.sandbox_remote
FD UID...`, started by the engine next to the worker, in a bubblewrap sandbox of its own (no
network, a view of only the system, the Python runtime and the package, task folders covered),
as root there with only the capabilities grading/sandbox.py needs. It runs programs with
`Sandbox` (one leased uid per slot: never the worker's, never an agent's) and never sees the model,
the split, the tests or the worker's files: programs arrive as text and the channel to the
trusted checker (grading/code_protocol.py) arrives as a socket.

Protocol on the socket (fd FD in both processes; the worker finds it in $AUTORL_CODE_SANDBOX_FD):
a request is one marker byte (`c` carrying the channel socket as SCM_RIGHTS, or `n`), then a
4-byte big-endian length and a JSON object; a reply is a length and a JSON object.
  {"op": "open", "limits": {...}, "workers": n, "hide": [...]}   -> {"isolation": {...}} | {"error"}
  {"op": "run", "id": k, "program": "...", "overrides": {...}}  -> {"id": k, "outcome": {...}}
The server ends when the worker's end closes.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from autorl_tui.grading.sandbox import Sandbox, SandboxLimits, SandboxOutcome

FD_ENV = "AUTORL_CODE_SANDBOX_FD"
MAX_MESSAGE = 64 * 2**20


def code_sandbox(limits: SandboxLimits, *, workers: int, base_dir: Path | None, hide: list) -> "Sandbox | RemoteSandbox":
    """The sandbox a scorer runs generated code in: the engine's code server when the worker was
    given one, else a `Sandbox` in this process (`autorl-tui score`, tests, unsandboxed hosts)."""
    fd = os.environ.get(FD_ENV)
    if fd:
        return RemoteSandbox(socket.socket(fileno=int(fd)), limits, workers=workers, hide=hide)
    return Sandbox(limits, workers=workers, base_dir=base_dir, hide=hide)


def _send(sock: socket.socket, obj: dict, fd: int | None = None) -> None:
    data = json.dumps(obj).encode()
    if fd is None:
        sock.sendall(b"n")
    else:
        socket.send_fds(sock, [b"c"], [fd])
    sock.sendall(len(data).to_bytes(4, "big") + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _recv(sock: socket.socket) -> dict | None:
    head = _recv_exact(sock, 4)
    if head is None:
        return None
    size = int.from_bytes(head, "big")
    if size > MAX_MESSAGE:
        raise ValueError(f"message of {size} bytes")
    body = _recv_exact(sock, size)
    return None if body is None else json.loads(body)


class RemoteSandbox:
    """The worker's side: the `Sandbox` interface scorers use (`run`, `limits`, `isolation`, `close`)."""

    def __init__(self, sock: socket.socket, limits: SandboxLimits, *, workers: int, hide: list):
        self.sock = sock
        self.limits = limits
        self._send_lock = threading.Lock()
        self._pending: dict[int, Future] = {}
        self._next = 1
        self._lock = threading.Lock()
        _send(sock, {"op": "open", "limits": asdict(limits), "workers": int(workers), "hide": [str(p) for p in hide]})
        reply = _recv(sock)
        if not reply or "isolation" not in reply:
            raise RuntimeError(f"the code sandbox did not start: {(reply or {}).get('error', 'no answer')}")
        self.isolation: dict[str, str] = {**reply["isolation"], "server": "separate process (engine's code server)"}
        threading.Thread(target=self._read, daemon=True, name="code-sandbox-replies").start()

    def _read(self) -> None:
        try:
            while (msg := _recv(self.sock)) is not None:
                with self._lock:
                    fut = self._pending.pop(msg.get("id"), None)
                if fut is not None:
                    fut.set_result(msg.get("outcome"))
        except (OSError, ValueError):
            pass
        with self._lock:
            waiting, self._pending = list(self._pending.values()), {}
        for fut in waiting:
            fut.set_result(None)

    def run(self, program: str, *, channel: socket.socket | None = None, **overrides) -> SandboxOutcome:
        fut: Future = Future()
        with self._lock:
            job, self._next = self._next, self._next + 1
            self._pending[job] = fut
        try:
            with self._send_lock:
                _send(self.sock, {"op": "run", "id": job, "program": program, "overrides": overrides},
                      channel.fileno() if channel is not None else None)
        except OSError as exc:
            with self._lock:
                self._pending.pop(job, None)
            return SandboxOutcome(False, "sandbox_error", f"the code sandbox is gone: {exc}")
        finally:
            if channel is not None:
                channel.close()      # the server holds its copy: EOF reaches the checker when the program ends
        outcome = fut.result()
        if not isinstance(outcome, dict):
            return SandboxOutcome(False, "sandbox_error", "the code sandbox ended without answering")
        fields = SandboxOutcome.__dataclass_fields__
        return SandboxOutcome(**{k: v for k, v in outcome.items() if k in fields})

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def serve(sock: socket.socket, uids: list[int]) -> int:
    """The code server's loop: one Sandbox, programs run concurrently (at most one per uid)."""
    first = sock.recv(1)
    opened = _recv(sock) if first else None
    if not opened or opened.get("op") != "open":
        return 2
    try:
        limits = SandboxLimits.from_dict(opened.get("limits"))
        workers = max(1, min(int(opened.get("workers") or 1), len(uids)))
        sandbox = Sandbox(limits, workers=workers, hide=opened.get("hide") or [], uids=uids[:workers])
    except Exception as exc:  # noqa: BLE001 - told to the worker, which records it
        _send_reply(sock, threading.Lock(), {"error": f"{type(exc).__name__}: {exc}"})
        return 1
    send_lock = threading.Lock()
    _send_reply(sock, send_lock, {"isolation": sandbox.isolation})
    pool = ThreadPoolExecutor(workers)

    def run_one(req: dict, channel: socket.socket | None) -> None:
        try:
            overrides = {k: v for k, v in (req.get("overrides") or {}).items() if k in SandboxLimits.__dataclass_fields__}
            outcome = sandbox.run(str(req["program"]), channel=channel, **overrides).to_dict()
        except Exception as exc:  # noqa: BLE001
            outcome = SandboxOutcome(False, "sandbox_error", f"{type(exc).__name__}: {exc}").to_dict()
        try:
            _send_reply(sock, send_lock, {"id": req.get("id"), "outcome": outcome})
        except OSError:
            pass

    try:
        while True:
            marker, fds, _, _ = socket.recv_fds(sock, 1, 1)
            if not marker:
                break
            channel = socket.socket(fileno=fds[0]) if fds else None
            req = _recv(sock)
            if req is None or req.get("op") != "run":
                if channel is not None:
                    channel.close()
                break
            pool.submit(run_one, req, channel)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        sandbox.close()
    return 0


def _send_reply(sock: socket.socket, lock: threading.Lock, obj: dict) -> None:
    data = json.dumps(obj).encode()
    with lock:
        sock.sendall(len(data).to_bytes(4, "big") + data)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m autorl_tui.grading.sandbox_remote FD UID...", file=sys.stderr)
        return 2
    return serve(socket.socket(fileno=int(argv[0])), [int(u) for u in argv[1:]])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

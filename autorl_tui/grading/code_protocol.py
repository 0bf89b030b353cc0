"""Checking generated code without sharing a process with it.

The trusted side (this module, in the harness) runs the task's test program: the item's prompt
(for its helpers, e.g. HumanEval/32's `poly`) and its `test` (defining `check(candidate)`), with
`candidate` bound to a `CandidateProxy`. The code under test runs in the sandbox: the full
program (prompt + completion) followed by `DRIVER`, which serves calls on fd 4, a socket the
harness holds the other end of.

Protocol on the channel: frames of a 4-byte big-endian length and a UTF-8 JSON object.
  sandbox -> harness  {"ready": true}   once the program ran and defines the entry point
  harness -> sandbox  {"args": <plain>, "kwargs": <plain>}
  sandbox -> harness  {"value": <plain>} | {"raised": "Type: message"} | {"unplain": "why"}
<plain> is grading/plain_data.py's form. The harness rebuilds every value as fresh builtins, so
the test's `==`, `abs(a - b) < 1e-6` or `math.isclose` run on real ints, floats, lists... never
on an object of the candidate's making. Whatever the program does in its own process (writes to
stdout, patches the driver, exits early, walks frames, reads gc objects) it can only answer calls;
the expected values never enter its process. A missing reply (EOF, the sandbox killed it), a
malformed or oversized frame, or a non-plain value breaks the channel: `CallFailed`, a
BaseException so a test's `except Exception` cannot swallow it, and the item fails regardless.
"""

from __future__ import annotations

import functools
import json
import socket
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from autorl_tui.grading import plain_data
from autorl_tui.grading.plain_data import NotPlain
from autorl_tui.grading.sandbox import Sandbox, SandboxOutcome

CHANNEL_FD = 4
MAX_FRAME = 16 * 2**20
_CODEC_SOURCE = Path(plain_data.__file__).read_text()

DRIVER = '''

def __autorl_serve(name, codec_source):
    import os
    codec = {"__name__": "autorl_plain_data"}
    exec(codec_source, codec)
    candidate = globals().get(name)
    if not callable(candidate):
        raise NameError("the program defines no function " + repr(name))

    def read_exact(n):
        buf = b""
        while len(buf) < n:
            chunk = os.read(%(fd)d, n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def send(obj):
        data = codec["json"].dumps(obj, separators=(",", ":")).encode()
        data = len(data).to_bytes(4, "big") + data
        while data:
            data = data[os.write(%(fd)d, data):]

    send({"ready": True})
    while True:
        head = read_exact(4)
        body = read_exact(int.from_bytes(head, "big")) if head else None
        if body is None:
            return
        msg = codec["json"].loads(body)
        args, kwargs = codec["from_plain"](msg["args"]), codec["from_plain"](msg["kwargs"])
        try:
            result = candidate(*args, **kwargs)
        except Exception as exc:
            try:
                text = type(exc).__name__ + ": " + str(exc)
            except Exception:
                text = type(exc).__name__
            send({"raised": text[:2000]})
            continue
        try:
            reply = {"value": codec["to_plain"](result)}
            send(reply)
        except (ValueError, RecursionError) as exc:
            send({"unplain": str(exc)[:500]})


__autorl_serve(%(name)r, %(codec)r)
'''


class CallFailed(BaseException):
    """The channel to the code under test broke; the item fails whatever the test does with this."""


class CandidateRaised(Exception):
    """The candidate raised (the test sees it as the candidate's exception, as in the official harness)."""


def sandbox_program(solution: str, entry_point: str) -> str:
    """What runs in the sandbox: the solution (prompt + completion), then the call server."""
    return solution + DRIVER % {"fd": CHANNEL_FD, "name": entry_point, "codec": _CODEC_SOURCE}


class CandidateProxy:
    """Stands for the candidate function in the trusted test: forwards each call over the channel."""

    def __init__(self, sock: socket.socket, call_timeout_s: float, start_timeout_s: float):
        self.sock = sock
        self.call_timeout_s = call_timeout_s
        self.start_timeout_s = start_timeout_s   # the sandbox's start and the program's top level
        self.ready = False
        self.calls = 0
        self.failure: str | None = None
        self.failure_kind: str | None = None

    def _fail(self, why: str, kind: str = "runtime_error"):
        if self.failure is None:
            self.failure, self.failure_kind = why, kind
        raise CallFailed(self.failure)

    def __call__(self, *args, **kwargs):
        if self.failure is not None:
            raise CallFailed(self.failure)
        self.calls += 1
        try:
            body = json.dumps({"args": plain_data.to_plain(list(args)), "kwargs": plain_data.to_plain(kwargs)},
                              allow_nan=False, separators=(",", ":")).encode()
        except (NotPlain, ValueError) as exc:
            self._fail(f"the test passed an argument that is not plain data ({exc}); the task's test cannot "
                       "be run across the sandbox boundary", "runtime_error")
        if not self.ready:
            if self._frame(self.start_timeout_s, "the program's start") != {"ready": True}:
                self._fail("malformed reply (expected the ready message)")
            self.ready = True
        try:
            self.sock.settimeout(self.call_timeout_s)
            self.sock.sendall(len(body).to_bytes(4, "big") + body)
        except OSError as exc:
            self._fail(f"the channel broke: {exc}")
        reply = self._frame(self.call_timeout_s, "the per-call limit")
        if not isinstance(reply, dict) or len(reply) != 1:
            self._fail("malformed reply")
        (key, value), = reply.items()
        if key == "value":
            try:
                return plain_data.from_plain(value)
            except (NotPlain, RecursionError):
                self._fail("malformed reply value", "wrong_answer")
        if key == "raised" and isinstance(value, str):
            raise CandidateRaised(value[:2000])
        if key == "unplain" and isinstance(value, str):
            self._fail(f"the candidate returned a value that is not plain data ({value[:300]})", "wrong_answer")
        self._fail("malformed reply")

    def _frame(self, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        try:
            head = self._recv(4, deadline)
            if head is None:
                self._fail("no reply: the program ended or was stopped before answering")
            size = int.from_bytes(head, "big")
            if size > MAX_FRAME:
                self._fail(f"reply of {size} bytes exceeds {MAX_FRAME}")
            data = self._recv(size, deadline)
            if data is None:
                self._fail("the reply was cut off")
        except socket.timeout:
            self._fail(f"no reply within {what} of {timeout:g} s", "timeout")
        except OSError as exc:
            self._fail(f"the channel broke: {exc}")
        try:
            return json.loads(data)
        except (ValueError, RecursionError):
            self._fail("malformed reply")

    def _recv(self, n: int, deadline: float) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise socket.timeout()
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)


@functools.lru_cache(maxsize=512)
def _compiled(source: str, filename: str):
    return compile(source, filename, "exec")


@dataclass
class CheckResult:
    passed: bool
    failure_kind: str | None       # wrong_answer | runtime_error | timeout | format_error (None when passed)
    error: str | None
    outcome: SandboxOutcome        # the sandbox's account of the program (its stdout, limits hit, ...)
    calls: int
    duration_s: float


def run_check(sandbox: Sandbox, item: dict, solution: str, call_timeout_s: float) -> CheckResult:
    """Run item's test in this process against `solution` running in the sandbox."""
    t0 = time.monotonic()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    box: dict = {}

    def serve():
        try:
            box["outcome"] = sandbox.run(sandbox_program(solution, item["entry_point"]), channel=theirs)
        except Exception as exc:   # the harness side of the sandbox failed: an infrastructure error for this item
            box["outcome"] = SandboxOutcome(False, "sandbox_error", f"{type(exc).__name__}: {exc}")

    server = threading.Thread(target=serve, name=f"sandbox {item.get('id')}", daemon=True)
    server.start()
    # The sandbox's wall-time limit bounds the whole program (it is killed: EOF here); the start
    # wait only guards against a sandbox that never starts it.
    proxy = CandidateProxy(ours, call_timeout_s, start_timeout_s=sandbox.limits.wall_s + 60)
    proxy.__name__ = proxy.__qualname__ = item["entry_point"]
    test_name = f"<test of {item.get('id')}>"
    error: BaseException | None = None
    try:
        ns: dict = {"__name__": "__autorl_check__"}
        exec(_compiled(item["prompt"], f"<prompt of {item.get('id')}>"), ns)    # task data: trusted
        ns[item["entry_point"]] = proxy
        exec(_compiled(item["test"], test_name), ns)
        ns["check"](proxy)
    except CallFailed:
        pass
    except Exception as exc:
        error = exc
    finally:
        ours.close()     # the program's driver sees EOF and ends
    server.join()
    outcome = box["outcome"]
    duration = time.monotonic() - t0
    if proxy.failure is None and error is None:
        return CheckResult(True, None, None, outcome, proxy.calls, duration)
    if proxy.failure is not None:
        kind, text = proxy.failure_kind, proxy.failure
        if kind == "runtime_error" and outcome.reason in ("timeout", "cpu_time"):
            kind = "timeout"
        if kind == "runtime_error" and outcome.reason == "syntax_error":
            kind = "format_error"
        per_call = proxy.failure_kind == "timeout"   # the program still runs then, until its wall-time limit
        if kind != "wrong_answer" and not per_call and outcome.reason and outcome.error:   # the sandbox says why better
            text = outcome.error
            if outcome.lineno is not None and outcome.line:
                text += f" (line {outcome.lineno}: {outcome.line})"
        return CheckResult(False, kind, text, outcome, proxy.calls, duration)
    lines = traceback.format_exception_only(type(error), error)
    text = (lines[-1].strip() if lines else type(error).__name__)[:2000]
    where = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == test_name]
    if where:
        source = item["test"].splitlines()
        lineno = where[-1].lineno
        if lineno and 0 < lineno <= len(source):
            text += f" (test line {lineno}: {source[lineno - 1].strip()[:300]})"
    kind = "wrong_answer" if isinstance(error, AssertionError) else "runtime_error"
    return CheckResult(False, kind, text, outcome, proxy.calls, duration)

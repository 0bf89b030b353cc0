"""Wall-clock limits on pure-Python work inside the grader worker (chat-template rendering).

A submitted tokenizer's chat template is Jinja run by the worker: a template that loops or
recurses must fail that submission, not hold the grading slot. SIGALRM interrupts Python bytecode,
so the limit works on the worker's main thread; elsewhere (or with no limit) the grading process's
own timeout, set by the engine, is the bound."""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager


class TimeLimitExceeded(Exception):
    pass


@contextmanager
def time_limit(seconds: float | None):
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    if seconds <= 0:
        raise TimeLimitExceeded()

    def _expired(signum, frame):
        raise TimeLimitExceeded()

    previous = signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class RenderBudget:
    """Per-call and total time allowed for rendering prompts; None disables a limit."""

    def __init__(self, per_call_s: float | None = 5.0, total_s: float | None = 60.0):
        self.per_call_s = per_call_s
        self.total_s = total_s
        self.spent_s = 0.0

    @classmethod
    def from_dict(cls, limits: dict | None) -> "RenderBudget":
        limits = {} if limits is None else limits
        return cls(limits.get("per_prompt_s", 5.0), limits.get("total_s", 60.0))

    def allowed(self) -> float | None:
        left = None if self.total_s is None else self.total_s - self.spent_s
        if self.per_call_s is None:
            return left
        return self.per_call_s if left is None else min(self.per_call_s, left)

    @contextmanager
    def call(self):
        t0 = time.perf_counter()
        try:
            with time_limit(self.allowed()):
                yield
        finally:
            self.spent_s += time.perf_counter() - t0

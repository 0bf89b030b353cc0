"""How much CPU the machine left idle lately: whether a warm grader's spare warms up at once.

The warm server forks the next grading's spare as a grading starts, and the spare warms itself up
(~55 ms of CPU on the tiny model) while that grading runs. With a free core that costs the grading
nothing; on a busy machine it took the grading's share (`warm_server.warm_up_when`). A lower
scheduling priority for the spare does not do it where each session is a scheduling group of its
own (the kernel's autogroups: an idle-priority task alone in its group gets the group's whole
share; tried, docs/grading.md), so the server measures instead.

Machine-wide, from /proc/stat (not namespaced: a sandbox's own /proc shows the host's): the idle
share of all CPUs' time between two readings, times the number of CPUs."""

from __future__ import annotations

import os
import time
from collections import deque

STAT = "/proc/stat"


def _read(path: str = STAT) -> tuple[int, int, int] | None:
    """(idle ticks, all ticks, CPUs) of the aggregate `cpu` line; None where there is none."""
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError:
        return None
    cpus = sum(1 for line in text.splitlines() if line.startswith("cpu") and line[3:4].isdigit())
    for line in text.splitlines():
        if line.startswith("cpu "):
            fields = [int(x) for x in line.split()[1:9]]    # user nice system idle iowait irq softirq steal
            if len(fields) < 5:
                return None
            return fields[3] + fields[4], sum(fields), cpus or os.cpu_count() or 1
    return None


class IdleGauge:
    """The idle CPUs over a recent span: readings are kept (`mark`, and each `idle_cpus` call), and
    a span counts from the latest one at least MIN_SPAN_S old (a shorter one has few ticks: the
    kernel counts CPU time in 10 ms units)."""

    MIN_SPAN_S = 0.05

    def __init__(self, path: str = STAT):
        self.path = path
        self.marks: deque[tuple[float, tuple[int, int, int]]] = deque(maxlen=16)
        self.mark()

    def mark(self) -> None:
        """Keep a reading taken now."""
        now = _read(self.path)
        if now is not None:
            self.marks.append((time.monotonic(), now))

    def idle_cpus(self) -> float | None:
        """Idle CPUs on average over the span from the latest reading at least MIN_SPAN_S old (or
        the oldest kept) to now; None where /proc/stat cannot tell (no file, or no tick counted)."""
        now, t = _read(self.path), time.monotonic()
        if now is None or not self.marks:
            return None
        old = [m for when, m in self.marks if t - when >= self.MIN_SPAN_S]
        base = old[-1] if old else self.marks[0][1]
        self.marks.append((t, now))
        if now[1] <= base[1]:
            return None
        return (now[0] - base[0]) / (now[1] - base[1]) * now[2]

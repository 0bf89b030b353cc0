"""When must the agent stop? RUN_DEADLINE (epoch seconds or ISO 8601), else run_meta.json's
`deadline` in the workspace, else --deadline / --max-seconds, else never."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path


def parse_time(value) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        pass
    try:
        t = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return t.timestamp()


def find_deadline(workspace: Path, cli_deadline: str | None = None, max_seconds: float | None = None,
                  started: float | None = None) -> float | None:
    candidates = [parse_time(os.environ.get("RUN_DEADLINE"))]
    meta = workspace / "run_meta.json"
    if meta.is_file():
        try:
            candidates.append(parse_time(json.loads(meta.read_text()).get("deadline")))
        except (ValueError, AttributeError):
            pass
    candidates.append(parse_time(cli_deadline))
    if max_seconds:
        candidates.append((started or time.time()) + max_seconds)
    found = [c for c in candidates if c is not None]
    return min(found) if found else None


class Clock:
    def __init__(self, deadline: float | None, margin_s: float = 1.0):
        self.deadline = deadline
        self.margin_s = margin_s

    def remaining(self) -> float:
        """Seconds left before we must have stopped (infinite without a deadline)."""
        if self.deadline is None:
            return float("inf")
        return self.deadline - self.margin_s - time.time()

    def bound(self, seconds: float) -> float:
        """`seconds`, but never past the deadline (at least a tiny positive timeout)."""
        return max(0.05, min(seconds, self.remaining()))

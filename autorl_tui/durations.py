"""Parse and format durations such as '90s', '10m', '1h30m', '2h'."""

import re

from autorl_tui.exitcodes import UsageError

_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(h|m|s|ms)?")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, None: 1.0}


def parse_duration(value) -> float:
    """Seconds from a number or a string like '120s', '10m', '1h30m'. Raises UsageError."""
    if isinstance(value, bool):
        raise UsageError(f"duration {value!r} is not a duration: write e.g. 120s, 10m or 1h30m")
    if isinstance(value, (int, float)):
        if value <= 0:
            raise UsageError(f"duration {value!r} must be positive")
        return float(value)
    text = str(value).strip().lower().replace(" ", "")
    pos, total = 0, 0.0
    while pos < len(text):
        m = _PART.match(text, pos)
        if not m or m.end() == pos:
            raise UsageError(f"duration {value!r} is not understood: write e.g. 120s, 10m or 1h30m")
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if not text or total <= 0:
        raise UsageError(f"duration {value!r} must be positive: write e.g. 120s, 10m or 1h30m")
    return total


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{h}h{m:02d}m"
    if m:
        return f"{m}m{s:02d}s"
    return f"{s}s"

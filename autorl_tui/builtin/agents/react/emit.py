"""Our stdout protocol (`react_json`): one JSON object a line, {"type": <action kind>, ...}, the
fields of autorl_tui/instrument/actions.py. Nothing else is written to stdout."""

from __future__ import annotations

import json
import sys
import threading

_lock = threading.Lock()
OUTPUT_LIMIT = 20_000


def emit(kind: str, **fields) -> None:
    event = {"type": kind}
    for k, v in fields.items():
        if v is None:
            continue
        if isinstance(v, str) and len(v) > OUTPUT_LIMIT + 64:
            v = v[:OUTPUT_LIMIT] + f"\n[... {len(v) - OUTPUT_LIMIT} more characters]"
        event[k] = v
    line = json.dumps(event, ensure_ascii=False)
    with _lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def log(text: str) -> None:
    """Diagnostics go to stderr, never into the action stream."""
    with _lock:
        sys.stderr.write(text.rstrip() + "\n")
        sys.stderr.flush()

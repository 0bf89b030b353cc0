"""Reading an operator's JSON-lines file (`score --completions`, `score --episodes`) with one-line
errors naming the file, the line and the shape expected."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from autorl_tui.exitcodes import UsageError


def read_rows(path: Path, flag: str, shape: str, needs: str, accept: Callable[[object], bool]) -> list[dict]:
    """The file's objects; `shape` is the line shape shown in errors, `needs` what a line lacks when
    `accept(row)` is false. Blank lines are skipped; no rows at all is an error."""
    if not path.is_file():
        raise UsageError(f"{flag} {path}: no such file")
    rows = []
    try:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError as exc:
                    raise UsageError(f"{path} line {n}: not JSON ({exc}); each line must be {shape}") from None
                if not isinstance(row, dict) or "id" not in row or not accept(row):
                    raise UsageError(f"{path} line {n}: needs {needs}; got {line.strip()[:120]}")
                rows.append(row)
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc})") from None
    if not rows:
        raise UsageError(f"{path}: no {flag.lstrip('-')} (expected JSON lines {shape})")
    return rows

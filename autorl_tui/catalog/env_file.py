"""A `.env` file as AutoRL-Bench's opencode/openhands folders load it (`export $(grep -v '^#' .env |
xargs)`): `NAME=value` lines, `export ` allowed, `#` comments and blank lines skipped, one pair of
surrounding quotes taken off a value. Stricter than `xargs` where that would guess: a line that is
not `NAME=value` is an error naming the file and line."""

from __future__ import annotations

import re
from pathlib import Path

from autorl_tui.exitcodes import UsageError

_LINE = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def read_env_file(path: Path, reserved: set[str] | frozenset[str] = frozenset()) -> dict[str, str]:
    """{NAME: value} in file order; UsageError ("FILE:LINE: ...") for a malformed line or a name in
    `reserved` (the workspace contract's own)."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read it as a text file ({exc})") from None
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            raise UsageError(f"{path}:{n}: expected NAME=value, got {line[:60]!r}")
        name, value = m.group(1), m.group(2).strip()
        if name in reserved:
            raise UsageError(f"{path}:{n}: {name} is the harness's own (the workspace contract sets it); "
                             f"remove that line or point env_file at a copy without it")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        out[name] = value
    return out

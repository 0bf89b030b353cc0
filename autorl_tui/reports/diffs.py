"""Unified diffs between two code revisions (manifests of path -> blob sha256)."""

from __future__ import annotations

import difflib
import re
from typing import Callable


def _text(content: bytes | None) -> list[str] | None:
    if content is None:
        return []
    if b"\0" in content[:8192]:
        return None
    try:
        return content.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def diff_manifests(old: dict[str, str], new: dict[str, str], fetch: Callable[[str], bytes | None], *,
                   max_lines_per_file: int = 200, max_lines_total: int = 600, first: set[str] = frozenset()) -> dict:
    """Files added, removed and modified between two manifests, with capped unified diffs. Paths in
    `first` (the files the submitted pipeline ran) come first, so the line budget goes to them."""
    files, total, truncated = [], 0, False
    added = removed = 0
    for path in sorted(set(old) | set(new), key=lambda p: (p not in first, p)):
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        status = "added" if a is None else "removed" if b is None else "modified"
        a_lines = _text(fetch(a)) if a else []
        b_lines = _text(fetch(b)) if b else []
        entry = {"path": path, "status": status, "added": 0, "removed": 0, "binary": False, "diff": "",
                 "truncated": False, "ran": path in first}
        if a_lines is None or b_lines is None:
            entry["binary"] = True
        else:
            lines = list(difflib.unified_diff(a_lines, b_lines, fromfile=f"a/{path}", tofile=f"b/{path}", n=2))
            entry["added"] = sum(1 for ln in lines if ln.startswith("+") and not ln.startswith("+++"))
            entry["removed"] = sum(1 for ln in lines if ln.startswith("-") and not ln.startswith("---"))
            budget = max(0, min(max_lines_per_file, max_lines_total - total))
            if len(lines) > budget:
                entry["truncated"] = True
                truncated = True
            shown = lines[:budget]
            total += len(shown)
            entry["diff"] = "".join(ln if ln.endswith("\n") else ln + "\n" for ln in shown)
        added += entry["added"]
        removed += entry["removed"]
        files.append(entry)
    return {"files": files, "lines_added": added, "lines_removed": removed, "truncated": truncated}


# a script given to an interpreter or launcher (options before it skipped): what a command ran,
# as opposed to a file merely mentioned ("wrote train.py, sft.py")
_RUN = re.compile(r"(?:\bpython[\d.]*|\bbash|\bsh|\btorchrun|\bdeepspeed|\baccelerate\s+launch|\buv\s+run)"
                  r"(?:\s+-\S+(?:\s+\d+)?)*\s+([\w./-]+\.(?:py|sh))\b")


def files_run(commands: list[str], paths) -> set[str]:
    """Which of `paths` (relative to code/) the commands ran: `python code/train.py`, `bash run.sh`,
    `accelerate launch /ws/code/sft.py` ran their file; a line that only names a file did not."""
    named = {m.group(1) for c in commands for m in _RUN.finditer(c)}
    out = set()
    for path in paths:
        for n in named:
            if n == path or n.endswith("/" + path) or (("/" not in path) and n.rsplit("/", 1)[-1] == path):
                out.add(path)
                break
    return out

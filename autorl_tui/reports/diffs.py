"""Unified diffs between two code revisions (manifests of path -> blob sha256)."""

from __future__ import annotations

import difflib
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
                   max_lines_per_file: int = 200, max_lines_total: int = 600) -> dict:
    """Files added, removed and modified between two manifests, with capped unified diffs."""
    files, total, truncated = [], 0, False
    added = removed = 0
    for path in sorted(set(old) | set(new)):
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        status = "added" if a is None else "removed" if b is None else "modified"
        a_lines = _text(fetch(a)) if a else []
        b_lines = _text(fetch(b)) if b else []
        entry = {"path": path, "status": status, "added": 0, "removed": 0, "binary": False, "diff": "",
                 "truncated": False}
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

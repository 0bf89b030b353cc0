"""Reading code revisions back: manifests and blobs to unified diffs (read-only; any reader)."""

from __future__ import annotations

import difflib
import json
import zlib

from autorl_tui.store.records import Rows

MAX_DIFF_BYTES = 512 * 1024   # a file larger than this is summarized, not diffed


def _blob(rows: Rows, digest: str) -> bytes | None:
    found = rows("SELECT encoding, content FROM blobs WHERE sha256 = ?", (digest,))
    if not found:
        return None
    content = bytes(found[0]["content"])
    return zlib.decompress(content) if found[0]["encoding"] == "zlib" else content


def _manifest(rows: Rows, run_id: str, seq: int) -> dict[str, str] | None:
    found = rows("SELECT manifest FROM revisions WHERE run_id = ? AND seq = ?", (run_id, seq))
    if not found:
        return None
    value = found[0]["manifest"]
    return json.loads(value) if isinstance(value, str) else dict(value or {})


def _text(data: bytes | None) -> list[str] | None:
    if data is None:
        return None
    if b"\0" in data[:8192] or len(data) > MAX_DIFF_BYTES:
        return None
    return data.decode("utf-8", errors="replace").splitlines(keepends=True)


def revision_diff(rows: Rows, run_id: str, seq: int, base_seq: int | None = None) -> str:
    """Unified diff of revision `seq` against `base_seq` (default: the previous revision; the
    first revision is diffed against nothing). Binary or huge files are listed, not diffed."""
    new = _manifest(rows, run_id, seq)
    if new is None:
        return f"(no revision {seq} for run {run_id})"
    if base_seq is None:
        prev = rows("SELECT MAX(seq) AS seq FROM revisions WHERE run_id = ? AND seq < ?", (run_id, seq))
        base_seq = prev[0]["seq"] if prev else None
    old = _manifest(rows, run_id, base_seq) if base_seq is not None else {}
    old = old or {}
    out: list[str] = []
    for path in sorted(set(old) | set(new)):
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        a_lines = _text(_blob(rows, a)) if a else []
        b_lines = _text(_blob(rows, b)) if b else []
        label_a = f"a/{path}" if a else "/dev/null"
        label_b = f"b/{path}" if b else "/dev/null"
        if a_lines is None or b_lines is None:
            out.append(f"Binary or large file {path} differs\n")
            continue
        out.extend(difflib.unified_diff(a_lines, b_lines, label_a, label_b))
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n"
    if not out:
        return f"(revision {seq}: no changes)\n"
    return "".join(out)

"""Tail a file that another process appends to, by byte offset: each read returns only complete
lines appended since the last read, never re-reads, and keeps a partial last line until its
newline arrives (or until `final=True`, when the writer is known to be gone).

The file is opened with engine/safe_files.py below `root` (by default its own folder): a link, FIFO
or device there raises UnsafeFile instead of being followed, blocked on or read without end, and
one call reads at most `max_per_call` bytes (the rest comes on the next call)."""

from __future__ import annotations

from pathlib import Path

from autorl_tui.engine.safe_files import read_slice

MAX_LINE = 64 * 1024   # longer lines are split (an agent printing a 10 MB line must not stall us)


class FileTail:
    def __init__(self, path: Path, offset: int = 0, max_read: int = 4 * 1024 * 1024, *, root: Path | None = None,
                 max_per_call: int = 16 * 1024 * 1024):
        self.path = Path(path)
        self.root = Path(root) if root is not None else self.path.parent
        self.offset = offset          # bytes consumed (complete lines only)
        self.max_read = max_read
        self.max_per_call = max_per_call
        self._partial = b""

    def read_lines(self, final: bool = False) -> list[str]:
        """New complete lines. Raises safe_files.UnsafeFile when the path is not a regular file."""
        lines: list[str] = []
        read = 0
        try:
            while read < self.max_per_call:
                chunk, size = read_slice(self.root, self.path, self.offset + len(self._partial), self.max_read)
                if size < self.offset:      # truncated or replaced: start again from the top
                    self.offset, self._partial = 0, b""
                    continue
                if not chunk:
                    break
                read += len(chunk)
                data = self._partial + chunk
                parts = data.split(b"\n")
                self._partial = parts.pop()
                for part in parts:
                    self.offset += len(part) + 1
                    lines.append(part.decode("utf-8", errors="replace").rstrip("\r"))
                while len(self._partial) > MAX_LINE:
                    head, self._partial = self._partial[:MAX_LINE], self._partial[MAX_LINE:]
                    self.offset += len(head)
                    lines.append(head.decode("utf-8", errors="replace"))
                if len(chunk) < self.max_read:
                    break
        except FileNotFoundError:
            return lines
        if final and self._partial:
            self.offset += len(self._partial)
            lines.append(self._partial.decode("utf-8", errors="replace"))
            self._partial = b""
        return lines

"""Tail a file that another process appends to, by byte offset: each read returns only complete
lines appended since the last read, never re-reads, and keeps a partial last line until its
newline arrives (or until `final=True`, when the writer is known to be gone)."""

from __future__ import annotations

import os
from pathlib import Path

MAX_LINE = 64 * 1024   # longer lines are split (an agent printing a 10 MB line must not stall us)


class FileTail:
    def __init__(self, path: Path, offset: int = 0, max_read: int = 4 * 1024 * 1024):
        self.path = Path(path)
        self.offset = offset          # bytes consumed (complete lines only)
        self.max_read = max_read
        self._partial = b""
        self.exhausted = True         # the last read reached the end of the file

    def read_lines(self, final: bool = False, max_lines: int | None = None, max_bytes: int | None = None) -> list[str]:
        """Complete lines appended since the last read. With max_lines/max_bytes, stops after that
        many lines (or about that many bytes: whole chunks); `exhausted` then says whether the file
        was read to its end. Lines not returned are not consumed: the next call reads them again."""
        lines: list[str] = []
        self.exhausted = True
        read = 0
        try:
            with open(self.path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                if size < self.offset:      # truncated or replaced: start again from the top
                    self.offset, self._partial = 0, b""
                fh.seek(self.offset + len(self._partial))
                while True:
                    if max_bytes is not None and read >= max_bytes:
                        self.exhausted = False
                        break
                    want = self.max_read if max_bytes is None else max(1, min(self.max_read, max_bytes - read))
                    chunk = fh.read(want)
                    if not chunk:
                        break
                    read += len(chunk)
                    data = self._partial + chunk
                    parts = data.split(b"\n")
                    self._partial = parts.pop()
                    if max_lines is not None and len(lines) + len(parts) >= max_lines:
                        parts = parts[:max_lines - len(lines)]
                        self._partial = b""          # the rest is read again next time, from offset
                        for part in parts:
                            self.offset += len(part) + 1
                            lines.append(part.decode("utf-8", errors="replace").rstrip("\r"))
                        self.exhausted = False
                        return lines
                    for part in parts:
                        self.offset += len(part) + 1
                        lines.append(part.decode("utf-8", errors="replace").rstrip("\r"))
                    while len(self._partial) > MAX_LINE:
                        head, self._partial = self._partial[:MAX_LINE], self._partial[MAX_LINE:]
                        self.offset += len(head)
                        lines.append(head.decode("utf-8", errors="replace"))
                    if len(chunk) < want:
                        break
        except FileNotFoundError:
            return lines
        if final and self._partial and self.exhausted:
            self.offset += len(self._partial)
            lines.append(self._partial.decode("utf-8", errors="replace"))
            self._partial = b""
        return lines

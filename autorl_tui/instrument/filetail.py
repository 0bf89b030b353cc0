"""Tail a file that another process appends to, by byte offset: each read returns only complete
lines appended since the last read, never re-reads, and keeps a partial last line until its
newline arrives (or until `final=True`, when the writer is known to be gone).

The file is opened with safe_files.py below `root` (by default its own folder): a link, FIFO
or device there raises UnsafeFile instead of being followed, blocked on or read without end, and
one call reads at most `max_per_call` bytes (the rest comes on the next call)."""

from __future__ import annotations

from pathlib import Path

from autorl_tui.safe_files import read_slice

MAX_LINE = 64 * 1024   # longer lines are split (an agent printing a 10 MB line must not stall us)
LINES_CHUNK = 128 * 1024   # a read's size when a number of lines is asked for


class FileTail:
    def __init__(self, path: Path, offset: int = 0, max_read: int = 4 * 1024 * 1024, *, root: Path | None = None,
                 max_per_call: int = 16 * 1024 * 1024):
        self.path = Path(path)
        self.root = Path(root) if root is not None else self.path.parent
        self.offset = offset          # bytes consumed (complete lines only)
        self.max_read = max_read
        self.max_per_call = max_per_call
        self._partial = b""
        self.exhausted = True         # the last read reached the end of the file

    def read_lines(self, final: bool = False, max_lines: int | None = None, max_bytes: int | None = None) -> list[str]:
        """Complete lines appended since the last read. Raises safe_files.UnsafeFile when the path is
        not a regular file. With max_lines/max_bytes, stops after that many lines (or about that many
        bytes: whole chunks); `exhausted` then says whether the file was read to its end. Lines not
        returned are not consumed: the next call reads them again."""
        lines: list[str] = []
        self.exhausted = True
        budget = self.max_per_call if max_bytes is None else min(max_bytes, self.max_per_call)
        read = 0
        try:
            while True:
                if read >= budget:
                    self.exhausted = False
                    break
                want = max(1, min(self.max_read, budget - read))
                if max_lines is not None:    # read what the lines wanted take (about), not what is re-read next time
                    want = min(want, LINES_CHUNK)
                chunk, size = read_slice(self.root, self.path, self.offset + len(self._partial), want)
                if size < self.offset:      # truncated or replaced: start again from the top
                    self.offset, self._partial = 0, b""
                    continue
                if not chunk:
                    break
                read += len(chunk)
                data = self._partial + chunk
                parts = data.split(b"\n")
                self._partial = parts.pop()
                if max_lines is not None and len(lines) + len(parts) >= max_lines:
                    parts = parts[:max_lines - len(lines)]
                    self._partial = b""          # the rest is read again next time, from offset
                    self.offset += sum(map(len, parts)) + len(parts)
                    lines.extend(_decode(parts))
                    self.exhausted = False
                    return lines
                self.offset += sum(map(len, parts)) + len(parts)
                lines.extend(_decode(parts))
                while len(self._partial) > MAX_LINE:
                    # cut before a `\r` if there is one: a progress bar's redraws, not the text they precede
                    cut = self._partial.rfind(b"\r", 1, MAX_LINE)
                    cut = cut if cut > 0 else MAX_LINE
                    head, self._partial = self._partial[:cut], self._partial[cut:]
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


def _decode(parts: list[bytes]) -> list[str]:
    """Complete lines as text, a trailing CR dropped: decoded in one go (a newline byte is never
    part of a UTF-8 sequence, so each line decodes as it would alone)."""
    if not parts:
        return []
    text = b"\n".join(parts).decode("utf-8", errors="replace")
    if "\r" not in text:
        return text.split("\n")
    return [line.rstrip("\r") for line in text.split("\n")]

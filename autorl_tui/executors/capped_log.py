"""The agent's raw `stdout.log` / `stderr.log`, capped on disk.

An agent can print without limit; the engine stores at most `log_cap.events`/`log_cap.bytes` of
it (instrument/log_ingest.py), and the raw file keeps more, but not everything: past
`log_cap.file_bytes` per stream (plan key; default 256 MiB) the file keeps its head, one marker
line where the output starts being dropped, and, when the stream ends, a second marker saying how
many bytes were dropped, followed by the stream's last bytes (a quarter of the cap, at most
8 MiB, from a line start). The file only ever grows (the engine tails it by offset), so what was
written stays where it was.

The local shim (executors/local_shim.py) copies the agent's stdout and stderr pipes through a
`CappedLog` each; the Docker log pumps (executors/docker_logs.py) apply the same cap, resumably."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

DEFAULT_FILE_BYTES = 256 << 20
MAX_TAIL_BYTES = 8 << 20
READ_BYTES = 1 << 20
PIPE_BYTES = 1 << 20


def _size(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def split_cap(cap: int | None) -> tuple[int, int]:
    """(head, tail) bytes of a cap: the tail is a quarter of it, at most MAX_TAIL_BYTES."""
    cap = int(cap or DEFAULT_FILE_BYTES)
    tail = min(MAX_TAIL_BYTES, cap // 4)
    return cap - tail, tail


def cap_marker(name: str, cap: int, tail_cap: int, after_newline: bool) -> bytes:
    return (b"" if after_newline else b"\n") + (
        f"[autorl-tui: {name} reached its cap of {_size(cap)} (plan key log_cap.file_bytes): output from here "
        f"on is dropped, except its last {_size(tail_cap)}, kept at the end]\n").encode()


def end_of_capped(name: str, tail: bytes, received: int) -> bytes:
    """The closing marker and the kept tail (from a line start when the tail was cut)."""
    if len(tail) < received:
        cut = tail.find(b"\n")
        tail = tail[cut + 1:] if cut >= 0 else tail
    return f"[autorl-tui: {received - len(tail):,} bytes of {name} dropped here; the last {len(tail):,} bytes follow]\n".encode() + tail


class CappedLog:
    def __init__(self, path: Path, cap: int | None = None):
        self.path = Path(path)
        self.cap = int(cap or DEFAULT_FILE_BYTES)
        self.head_cap, self.tail_cap = split_cap(self.cap)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
        self.written = os.fstat(self.fd).st_size
        self.last_byte = b"\n"
        self.capped = False
        self.received = 0          # bytes after the cap was reached (kept in the tail or dropped)
        self.tail = bytearray()

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
        if data:
            self.written += len(data)
            self.last_byte = data[-1:]

    def write(self, data: bytes) -> None:
        if not self.capped:
            room = max(0, self.head_cap - self.written)
            self._write(data[:room])
            if len(data) <= room:
                return
            data = data[room:]
            self.capped = True
            self._write(cap_marker(self.path.name, self.cap, self.tail_cap, self.last_byte == b"\n"))
        self.received += len(data)
        self.tail += data
        if len(self.tail) > 2 * self.tail_cap:
            del self.tail[:len(self.tail) - self.tail_cap]

    def close(self) -> None:
        if self.capped:
            tail = bytes(self.tail[-self.tail_cap:]) if self.tail_cap else b""
            self._write(end_of_capped(self.path.name, tail, self.received))
            self.tail = bytearray()
        os.close(self.fd)


def copy_pipe(read_fd: int, log: CappedLog) -> threading.Thread:
    """A thread copying read_fd into log until EOF (every writer gone); the log is left open."""

    def run() -> None:
        try:
            while chunk := os.read(read_fd, READ_BYTES):
                log.write(chunk)
        finally:
            os.close(read_fd)

    thread = threading.Thread(target=run, name=f"copy {log.path.name}", daemon=True)
    thread.start()
    return thread


def agent_pipe() -> tuple[int, int]:
    """(read end, write end) for an agent's output stream, with a larger buffer than the default."""
    r, w = os.pipe()
    try:
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except OSError:
        pass
    return r, w

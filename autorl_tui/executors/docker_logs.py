"""Copy a container's stdout/stderr into the attempt's log files, resumably.

One pump thread per stream follows the Docker logs API with timestamps. After writing, it records
its position (`docker-logs.json` in the log dir): the timestamp of the last entry copied, how many
entries carried exactly that timestamp, and the file's size then. A pump started again (after the
engine restarted and re-adopted the container) truncates the file back to the recorded size
(anything after it was written but not recorded) and asks Docker for entries from that timestamp
on, skipping those already copied: nothing is duplicated, nothing is lost.

The file is capped as a local agent's is (executors/capped_log.py): past the head, entries are
counted (`over`, recorded) and only the last ones kept in memory; when the stream ends the closing
marker and that tail are written once (`closed`, recorded).
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from autorl_tui.executors.capped_log import cap_marker, end_of_capped, split_cap

POSITIONS_FILE = "docker-logs.json"
_SAVE_EVERY_S = 0.25
_RETRIES = 8


@functools.lru_cache(maxsize=64)
def _epoch_seconds(main: str) -> int:
    return int(datetime.strptime(main, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp())


def parse_ts_ns(ts: bytes | str) -> int:
    """RFC3339Nano (`2026-11-22T01:30:00.1234Z`, trailing zeros trimmed) -> nanoseconds since epoch."""
    text = ts.decode() if isinstance(ts, bytes) else ts
    text = text.rstrip("Z")
    main, _, frac = text.partition(".")
    return _epoch_seconds(main) * 1_000_000_000 + int((frac + "000000000")[:9] or 0)


class Positions:
    """The shared position file of an attempt's two pumps."""

    def __init__(self, log_dir: Path, container_id: str):
        self.path = Path(log_dir) / POSITIONS_FILE
        self.lock = threading.Lock()
        try:
            self.data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.data = {}
        if self.data.get("container_id") != container_id:
            # another container wrote these files before (a reused log dir): append after it
            self.data = {"container_id": container_id}

    def get(self, stream: str) -> dict | None:
        with self.lock:
            pos = self.data.get(stream)
            return dict(pos) if pos else None

    def save(self, stream: str, pos: dict) -> None:
        with self.lock:
            self.data[stream] = dict(pos)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.data))
            os.replace(tmp, self.path)


class LogPump(threading.Thread):
    def __init__(self, client, container_id: str, stream: str, path: Path, positions: Positions,
                 cap: int | None = None):
        super().__init__(name=f"docker-logs-{stream}-{container_id[:12]}", daemon=True)
        self.client, self.container_id, self.stream = client, container_id, stream
        self.path, self.positions = Path(path), positions
        self.error: Exception | None = None
        self.skipped = 0          # entries Docker sent again on resume and we did not copy twice
        self.truncated = 0        # bytes written but not recorded by a dead pump, cut and refetched
        self.copied = 0           # entries copied so far (the owner watches it for progress)
        self._stop_requested = threading.Event()
        self.cap = cap
        self.head_cap, self.tail_cap = split_cap(cap)
        self.tail = bytearray()   # the last bytes past the head, since this pump started

    def join_while_copying(self, stall_s: float = 30.0) -> None:
        """Wait until the pump has copied everything (the container has exited, so its log ends),
        giving up only when no entry arrives for stall_s: a flood can take minutes to copy, and
        removing the container before the copy ends would lose its tail."""
        last, last_change = -1, time.monotonic()
        while self.is_alive():
            self.join(1.0)
            if self.copied != last:
                last, last_change = self.copied, time.monotonic()
            elif time.monotonic() - last_change >= stall_s:
                return

    def stop(self) -> None:
        """Stop copying at the next entry (the engine is detaching; a later pump resumes)."""
        self._stop_requested.set()

    def run(self) -> None:
        # A dropped connection (daemon hiccup) resumes from the recorded position, like a restart.
        for attempt in range(_RETRIES):
            try:
                self._copy()
                self.error = None
                return
            except Exception as exc:
                self.error = exc
                if type(exc).__name__ == "NotFound":      # the container is gone: nothing to resume
                    return
                if self._stop_requested.wait(min(0.2 * 2 ** attempt, 5.0)):
                    return

    def _copy(self) -> None:
        pos = self.positions.get(self.stream)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a+b") as f:
            size = f.seek(0, os.SEEK_END)
            if pos is None:
                # first pump of this container: record where its output starts before copying any
                pos = {"ns": 0, "skip": 0, "bytes": size}
                self.positions.save(self.stream, pos)
            if size > pos["bytes"]:
                self.truncated = size - pos["bytes"]
                f.truncate(pos["bytes"])        # written after the last recorded position: refetched
            elif size < pos["bytes"]:
                pos["bytes"] = size             # the file was cut by someone else: keep what is there
            f.seek(0, os.SEEK_END)
            kwargs = {"stdout": self.stream == "stdout", "stderr": self.stream == "stderr",
                      "stream": True, "follow": True, "timestamps": True}
            if pos["ns"]:
                # 1 us early: the daemon's filter is inclusive and a float loses nanoseconds
                kwargs["since"] = pos["ns"] / 1e9 - 1e-6
            seen_at_last = 0
            last_save = time.monotonic()
            for frame in self.client.api.logs(self.container_id, **kwargs):
                ts, _, payload = frame.partition(b" ")
                ns = parse_ts_ns(ts)
                if ns < pos["ns"]:
                    self.skipped += 1
                    continue
                if ns == pos["ns"]:
                    seen_at_last += 1
                    if seen_at_last <= pos["skip"]:
                        self.skipped += 1
                        continue
                    pos["skip"] += 1
                else:
                    pos["ns"], pos["skip"], seen_at_last = ns, 1, 1
                self._write(f, pos, payload)
                self.copied += 1
                if time.monotonic() - last_save >= _SAVE_EVERY_S:
                    self.positions.save(self.stream, pos)
                    last_save = time.monotonic()
                if self._stop_requested.is_set():
                    break
            else:        # the stream ended: the container is gone or exited
                if "over" in pos and not pos.get("closed"):
                    end = end_of_capped(self.path.name, bytes(self.tail[-self.tail_cap:]), pos["over"])
                    f.write(end)
                    f.flush()
                    pos["bytes"] += len(end)
                    pos["closed"] = True
            self.positions.save(self.stream, pos)

    def _write(self, f, pos: dict, payload: bytes) -> None:
        if "over" not in pos:
            room = max(0, self.head_cap - pos["bytes"])
            if len(payload) <= room:
                f.write(payload)
                f.flush()
                pos["bytes"] += len(payload)
                return
            head = payload[:room] + cap_marker(self.path.name, self.head_cap + self.tail_cap, self.tail_cap,
                                               (payload[:room] or b"\n")[-1:] == b"\n")
            f.write(head)
            f.flush()
            pos["bytes"] += len(head)
            pos["over"] = 0
            payload = payload[room:]
        pos["over"] += len(payload)
        self.tail += payload
        if len(self.tail) > 2 * self.tail_cap:
            del self.tail[:len(self.tail) - self.tail_cap]

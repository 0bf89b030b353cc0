"""Training metrics of one run, from every place a stock trainer or an agent's own loop leaves
them, grouped into training sessions (instrument/sessions.py) and stored once each:

1. TensorBoard event files (`events.out.tfevents.*`, read incrementally by byte offset; wall time
   per point),
2. `trainer_state.json` `log_history` (every checkpoint's copy; an entry is new only if its
   session does not have it yet; the time is when the harness first saw it),
3. the transformers/TRL log dicts on the agent's stdout (live; instrument/trainer_log.py),
4. METRICS_FILE (`logs/metrics.jsonl`) JSON lines, tailed by byte offset.

The order is fidelity: when two sources report the same point, the higher one's value is kept.
Every file is read from the agent-writable workspace with safe_files.py: regular files
only, no links, bounded reads. A file that is not one is an agent error, reported once as a note.
"""

from __future__ import annotations

import json
import math
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from autorl_tui.instrument.filetail import FileTail
from autorl_tui.instrument.sessions import NOT_STORED, Instance, NewPoint, SessionTracker, Upgrade
from autorl_tui.instrument.trainer_log import StdoutSessions, parse_log_dict
from autorl_tui.safe_files import FileTooLarge, UnsafeFile, open_regular, read_slice, walk_files

MAX_STATE_BYTES = 32 * 1024 * 1024     # one trainer_state.json
TB_SLICE = 8 * 1024 * 1024             # TensorBoard bytes read per file per scan
SKIP_KEYS = tuple(NOT_STORED)


@dataclass
class Note:
    """Something the harness could not read. agent_error: the agent's doing (a FIFO, a link, ...)."""
    message: str
    path: str | None = None
    agent_error: bool = False


def _num(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _values(obj: dict) -> dict[str, float | None]:
    out = {}
    for k, v in obj.items():
        if k in SKIP_KEYS:
            continue
        if isinstance(v, str) and v.lower() in ("nan", "inf", "-inf"):
            v = float(v)
        f = _num(v)
        if f is not None:
            out[str(k)[:200]] = None if math.isnan(f) else f
    return out


def parse_metrics_line(line: str) -> tuple[dict | None, str | None]:
    """({"ts", "step", "phase", "values"}, None) for one METRICS_FILE line, (None, None) for a blank
    one, (None, error) for a line that is not a metrics object."""
    line = line.strip()
    if not line:
        return None, None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc.msg})"
    if not isinstance(obj, dict):
        return None, "not a JSON object"
    step = obj.get("step")
    step = int(step) if isinstance(step, (int, float)) and not isinstance(step, bool) and math.isfinite(step) else None
    phase = obj.get("phase") if isinstance(obj.get("phase"), str) else None
    values = obj.get("metrics")
    if not isinstance(values, dict):   # also accept flat lines: {"step": 3, "loss": 0.4}
        values = {k: v for k, v in obj.items() if k not in ("ts", "phase")}
    return {"ts": _num(obj.get("ts")), "step": step, "phase": phase, "values": _values(values)}, None


def _tb_records(data: bytes):
    """(end offset, Event bytes) of each complete TFRecord in data."""
    pos = 0
    while len(data) - pos >= 12:
        (length,) = struct.unpack_from("<Q", data, pos)
        end = pos + 12 + length + 4
        if length > 64 * 1024 * 1024 or end > len(data):
            return
        yield end, data[pos + 12:pos + 12 + length]
        pos = end


class _Counter:
    """Session ids for a collector used without a store (tests, benchmarks)."""

    def __init__(self):
        self.n = 0

    def open(self, row: dict) -> int:
        self.n += 1
        return self.n


class MetricsCollector:
    """Collects new metric points of one workspace. The supervisor feeds the agent's stdout lines
    with `feed_stdout`; `poll()` (run off the event loop) returns new points and notes, and
    `take_upgrades()` the stored points a better source has refined. `offsets()` is the state to
    commit with the points (exactly-once resume)."""

    SCAN_EVERY_S = 3.0

    def __init__(self, workspace: Path, offsets: dict | None = None, tracker: SessionTracker | None = None,
                 metrics_file: str = "logs/metrics.jsonl"):
        self.workspace = Path(workspace)
        if tracker is None:
            counter = _Counter()
            tracker = SessionTracker(counter.open, lambda sid, fields: None)
        self.tracker = tracker
        o = offsets or {}
        mj = o.get("metrics_jsonl") if isinstance(o.get("metrics_jsonl"), dict) else {"offset": o.get("metrics_jsonl", 0)}
        self.metrics_file = metrics_file
        self.jsonl = FileTail(self.workspace / metrics_file, mj.get("offset", 0), root=self.workspace)
        self._jsonl_inst = Instance.from_dict(mj["inst"]) if mj.get("inst") else None
        self._jsonl_last = (mj.get("last_step"), mj.get("phase"))
        so = o.get("stdout") or {}
        self._stdout_inst = Instance.from_dict(so["inst"]) if so.get("inst") else None
        self._stdout = StdoutSessions(so.get("sessions"))
        self._pending_summary: list | None = so.get("pending_summary")
        self._stdout_lines: list[tuple[float, str]] = []
        self._states: dict[str, dict] = {k: v for k, v in (o.get("trainer_state") or {}).items() if isinstance(v, dict)}
        self._tb: dict[str, dict] = {k: v for k, v in (o.get("tensorboard") or {}).items() if isinstance(v, dict)}
        self._last_scan = 0.0
        self._reported: set[tuple] = set()
        self.bad_lines = 0
        self.stdout_points = 0

    def offsets(self) -> dict:
        # copies: the caller stages them for a later commit while the next poll may run
        return json.loads(json.dumps({
            "metrics_jsonl": {"offset": self.jsonl.offset, "inst": self._jsonl_inst.to_dict() if self._jsonl_inst else None,
                              "last_step": self._jsonl_last[0], "phase": self._jsonl_last[1]},
            "stdout": {"inst": self._stdout_inst.to_dict() if self._stdout_inst else None,
                       "sessions": self._stdout.state(), "pending_summary": self._pending_summary},
            "trainer_state": self._states,
            "tensorboard": self._tb}))

    # ---------------------------------------------------------------- sources
    def feed_stdout(self, lines: list[str], ts: float | None = None) -> None:
        """The agent's stdout lines as read (cheap: parsed in the next poll, off the event loop)."""
        ts = ts or time.time()
        self._stdout_lines.extend((ts, line) for line in lines if "'epoch'" in line)

    def poll(self, final: bool = False) -> tuple[list[NewPoint], list[Note]]:
        notes: list[Note] = []
        now = time.time()
        self._poll_stdout()
        self._poll_jsonl(final, now, notes)
        if final or now - self._last_scan >= self.SCAN_EVERY_S:
            self._last_scan = now
            for top in ("code", "output", "logs"):
                for rel in walk_files(self.workspace, top, lambda n: n == "trainer_state.json"):
                    self._read_trainer_state(rel, now, notes)
                for rel in walk_files(self.workspace, top, lambda n: n.startswith("events.out.tfevents")):
                    self._read_tensorboard(rel, final, notes)
        self._place_summary(final)
        points, self._upgrades = self.tracker.drain()
        return points, notes

    def take_upgrades(self) -> list[Upgrade]:
        ups, self._upgrades = getattr(self, "_upgrades", []), []
        return ups

    def _bad_file(self, rel: str, exc: Exception, notes: list[Note]) -> None:
        key = (rel, type(exc).__name__)
        if key in self._reported:
            return
        self._reported.add(key)
        if isinstance(exc, UnsafeFile):
            notes.append(Note(f"{exc.strerror or exc}: not read; write metrics to a regular file", rel, True))
        elif isinstance(exc, FileTooLarge):
            notes.append(Note(f"{exc.strerror or exc}: not read", rel, True))
        else:
            notes.append(Note(f"{rel}: could not be read: {exc}", rel, False))

    def _poll_stdout(self) -> None:
        lines, self._stdout_lines = self._stdout_lines, []
        for ts, line in lines:
            values = parse_log_dict(line)
            if values is None:
                continue
            new, summary = self._stdout.feed(values)
            if summary and (new or self._stdout_inst is None):
                # a summary with no log dict of its own trainer before it on stdout: it closes the
                # session that trainer's other sources opened; none yet: it waits for one
                self._pending_summary = [ts, values]
                self._stdout_inst = None
                continue
            if new or self._stdout_inst is None:
                self._place_summary(final=True)      # a waiting summary belongs before this new trainer
                self._stdout_inst = Instance("stdout", "stdout")
            self._record_stdout(values, ts, summary)

    def _record_stdout(self, values: dict, ts: float, summary: bool) -> None:
        self.tracker.record(self._stdout_inst, _values(values), ts=ts)
        self.stdout_points += 1
        if summary:
            self.tracker.close(self._stdout_inst, ts)

    def _place_summary(self, final: bool) -> None:
        """A lone summary joins the latest open session once there is one; at the end, with none,
        it is dropped (a session of summary keys only would be a phantom trainer run)."""
        if not self._pending_summary:
            return
        sid = self.tracker.latest_open()
        if sid is None and not final:
            return
        ts, values = self._pending_summary
        self._pending_summary = None
        if sid is not None:
            self._stdout_inst = Instance("stdout", "stdout")
            self.tracker.join(self._stdout_inst, sid)
            self._record_stdout(values, ts, True)

    def _poll_jsonl(self, final: bool, now: float, notes: list[Note]) -> None:
        try:
            lines = self.jsonl.read_lines(final=final)
        except (UnsafeFile, OSError) as exc:
            self._bad_file(self.metrics_file, exc, notes)
            return
        for line in lines:
            rec, err = parse_metrics_line(line)
            if err:
                self.bad_lines += 1
                if self.bad_lines <= 20:
                    notes.append(Note(f"{self.metrics_file}: skipped a line: {err}: {line[:120]!r}", self.metrics_file))
                continue
            if rec is None or not rec["values"]:
                continue
            last_step, last_phase = self._jsonl_last
            restart = rec["step"] is not None and last_step is not None and rec["step"] < last_step
            if self._jsonl_inst is None or restart or (rec["phase"] or None) != (last_phase or None):
                self._jsonl_inst = Instance("metrics_jsonl", f"metrics_jsonl:{self.metrics_file}", hint=rec["phase"])
            self._jsonl_last = (rec["step"] if rec["step"] is not None else last_step, rec["phase"])
            ts = rec["ts"] if rec["ts"] is not None and abs(rec["ts"] - now) < 7 * 86400 else now
            self.tracker.record(self._jsonl_inst, rec["values"], ts=min(ts, now), step=rec["step"], phase=rec["phase"])

    def _read_trainer_state(self, rel: Path, now: float, notes: list[Note]) -> None:
        key = str(rel)
        state = self._states.get(key)
        try:
            fd = open_regular(self.workspace, rel)
        except FileNotFoundError:
            return
        except (UnsafeFile, OSError) as exc:
            self._bad_file(key, exc, notes)
            return
        try:
            st = os.fstat(fd)
            sig = [st.st_ino, st.st_size, st.st_mtime_ns]
            if state and state.get("sig") == sig:
                return
            if st.st_size > MAX_STATE_BYTES:
                self._bad_file(key, FileTooLarge(27, f"{key}: {st.st_size} bytes, more than {MAX_STATE_BYTES}"), notes)
                return
            data = os.pread(fd, MAX_STATE_BYTES, 0)
        finally:
            os.close(fd)
        try:
            history = json.loads(data).get("log_history")
        except (ValueError, AttributeError):
            return         # being written: read again when it changes
        if not isinstance(history, list):
            return
        entries = [e for e in history if isinstance(e, dict)]
        first = json.dumps(entries[0], sort_keys=True)[:2000] if entries else None
        if state is None or state.get("first") != first or len(entries) < state.get("n", 0):
            # a new file, or the folder's file rewritten by another trainer run: a new instance
            state = {"n": 0, "first": first, "inst": Instance("trainer_state", f"trainer_state:{key}", hint=key).to_dict()}
        inst = Instance.from_dict(state["inst"])
        for entry in entries[state["n"]:]:
            values = _values(entry)
            step = entry.get("step")
            step = int(step) if isinstance(step, (int, float)) and not isinstance(step, bool) else None
            self.tracker.record(inst, values, ts=now, step=step)
        self._states[key] = {"sig": sig, "n": len(entries), "first": first, "inst": inst.to_dict()}

    def _read_tensorboard(self, rel: Path, final: bool, notes: list[Note]) -> None:
        key = str(rel)
        state = self._tb.get(key) or {"offset": 0,
                                      "inst": Instance("tensorboard", f"tensorboard:{key}", hint=key).to_dict()}
        try:
            data, size = read_slice(self.workspace, rel, state["offset"], TB_SLICE)
        except FileNotFoundError:
            return
        except (UnsafeFile, OSError) as exc:
            self._bad_file(key, exc, notes)
            return
        if not data:
            return
        try:
            from tensorboard.compat.proto import event_pb2
        except ImportError:
            return
        inst = Instance.from_dict(state["inst"])
        group: list = []          # events of one step: one record, like one log dict
        group_start = state["offset"]
        consumed = state["offset"]

        def emit():
            values = {tag: v for tag, v in group}
            self.tracker.record(inst, values, ts=group_wall[0], step=group_step[0])

        group_step, group_wall = [None], [None]
        for end, raw in _tb_records(data):
            record_start = consumed
            consumed = state["offset"] + end
            try:
                event = event_pb2.Event.FromString(raw)
            except Exception:
                continue
            scalars = []
            for value in event.summary.value:
                v = None
                if value.HasField("simple_value"):
                    v = float(value.simple_value)
                elif value.HasField("tensor") and value.tensor.float_val:
                    v = float(value.tensor.float_val[0])
                if v is not None:
                    scalars.append((value.tag, None if math.isnan(v) else v))
            if not scalars:
                if not group:
                    group_start = consumed
                continue
            if group and event.step != group_step[0]:
                emit()
                group, group_start = [], record_start
            if not group:
                group_step[0], group_wall[0] = int(event.step), float(event.wall_time)
            group.extend(scalars)
        if group and final:
            emit()
            group, group_start = [], consumed
        # an open group is read again next time (its step may have more values coming)
        self._tb[key] = {"offset": group_start if group else consumed, "inst": inst.to_dict()}

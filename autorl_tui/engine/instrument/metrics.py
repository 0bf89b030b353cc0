"""Training metrics from the workspace: `logs/metrics.jsonl` (primary, tailed by byte offset),
`trainer_state.json` `log_history` files and TensorBoard event files (found by scanning)."""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

from autorl_tui.engine.instrument.filetail import FileTail


@dataclass
class Point:
    name: str
    value: float | None
    step: int | None
    ts: float
    source: str
    phase: str | None = None


def _num(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def parse_metrics_line(line: str, now: float | None = None) -> tuple[list[Point], str | None]:
    """Points from one metrics.jsonl line, or ([], error) for a line that is not a metrics object."""
    line = line.strip()
    if not line:
        return [], None
    try:
        obj = json.loads(line)
    except ValueError as exc:
        return [], f"not JSON ({exc.msg})"
    if not isinstance(obj, dict):
        return [], "not a JSON object"
    ts = _num(obj.get("ts")) or now or time.time()
    step = obj.get("step")
    step = int(step) if isinstance(step, (int, float)) and not isinstance(step, bool) else None
    phase = obj.get("phase") if isinstance(obj.get("phase"), str) else None
    values = obj.get("metrics")
    if not isinstance(values, dict):   # also accept flat lines: {"step": 3, "loss": 0.4}
        values = {k: v for k, v in obj.items() if k not in ("ts", "step", "phase", "epoch")}
    points = []
    for name, v in values.items():
        if isinstance(v, str) and v.lower() in ("nan", "inf", "-inf"):
            v = float(v)
        f = _num(v)
        if f is None:
            continue
        points.append(Point(str(name)[:200], f, step, ts, "metrics_jsonl", phase))
    return points, None


class MetricsCollector:
    """Collects new metric points from one workspace. `poll()` returns new points and notes."""

    SCAN_EVERY_S = 3.0

    def __init__(self, workspace: Path, offsets: dict | None = None):
        self.workspace = workspace
        offsets = offsets or {}
        self.jsonl = FileTail(workspace / "logs" / "metrics.jsonl", offsets.get("metrics_jsonl", 0))
        self._trainer_states: dict[str, int] = dict(offsets.get("trainer_state", {}))   # path -> entries seen
        self._tb_loaders: dict[str, object] = {}
        self._tb_seen: dict[str, int] = dict(offsets.get("tensorboard", {}))          # path -> events seen
        self._last_scan = 0.0
        self.bad_lines = 0

    def offsets(self) -> dict:
        # copies: the caller stages them for a later commit while the next poll may run
        return {"metrics_jsonl": self.jsonl.offset, "trainer_state": dict(self._trainer_states),
                "tensorboard": dict(self._tb_seen)}

    def poll(self, final: bool = False) -> tuple[list[Point], list[str]]:
        points: list[Point] = []
        notes: list[str] = []
        now = time.time()
        for line in self.jsonl.read_lines(final=final):
            pts, err = parse_metrics_line(line, now)
            if err:
                self.bad_lines += 1
                if self.bad_lines <= 20:
                    notes.append(f"metrics.jsonl: skipped a line: {err}: {line[:120]!r}")
            points.extend(pts)
        if final or now - self._last_scan >= self.SCAN_EVERY_S:
            self._last_scan = now
            points.extend(self._scan_trainer_states())
            points.extend(self._scan_tensorboard(notes))
        return points, notes

    def _walk(self, predicate):
        for top in ("code", "output", "logs"):
            root = self.workspace / top
            if not root.is_dir():
                continue
            for dirpath, dirnames, filenames in os.walk(root):
                depth = Path(dirpath).relative_to(root).parts
                if len(depth) > 6:
                    dirnames[:] = []
                    continue
                for name in filenames:
                    if predicate(name):
                        yield Path(dirpath) / name

    def _scan_trainer_states(self) -> list[Point]:
        points = []
        for path in self._walk(lambda n: n == "trainer_state.json"):
            key = str(path.relative_to(self.workspace))
            try:
                if path.stat().st_size > 50 * 1024 * 1024:
                    continue
                history = json.loads(path.read_text()).get("log_history", [])
            except (OSError, ValueError, AttributeError):
                continue
            seen = self._trainer_states.get(key, 0)
            mtime = path.stat().st_mtime
            for entry in history[seen:]:
                step = entry.get("step")
                for name, v in entry.items():
                    if name in ("step", "epoch"):
                        continue
                    f = _num(v)
                    if f is not None:
                        points.append(Point(name, f, int(step) if isinstance(step, (int, float)) else None,
                                            mtime, "trainer_state"))
            self._trainer_states[key] = max(seen, len(history))
        return points

    def _scan_tensorboard(self, notes: list[str]) -> list[Point]:
        points = []
        files = list(self._walk(lambda n: n.startswith("events.out.tfevents")))
        if not files:
            return points
        try:
            from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
        except ImportError:
            return points
        for path in files:
            key = str(path.relative_to(self.workspace))
            fresh = key not in self._tb_loaders
            if fresh:
                self._tb_loaders[key] = EventFileLoader(str(path))
            loader = self._tb_loaders[key]
            to_skip = self._tb_seen.get(key, 0) if fresh else 0   # resuming after a restart
            count = 0
            try:
                for event in loader.Load():
                    count += 1
                    if count <= to_skip:
                        continue
                    for value in event.summary.value:
                        v = None
                        if value.HasField("simple_value"):
                            v = float(value.simple_value)
                        elif value.HasField("tensor") and value.tensor.float_val:
                            v = float(value.tensor.float_val[0])
                        if v is not None:
                            points.append(Point(value.tag, v, int(event.step), float(event.wall_time),
                                                "tensorboard"))
            except Exception as exc:  # a file being written may end mid-record: try again next scan
                notes.append(f"tensorboard {key}: {exc}")
            seen = self._tb_seen.get(key, 0)
            self._tb_seen[key] = max(seen, count) if fresh else seen + count
        return points


def is_finite(v: float | None) -> bool:
    return v is not None and not math.isnan(v) and not math.isinf(v)

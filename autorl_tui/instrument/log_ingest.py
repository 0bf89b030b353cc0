"""Bounded ingestion of an attempt's stdout/stderr into the store.

An agent can print millions of lines a minute. Reading, decoding and parsing run in a worker
thread (`read_batch`, called through `asyncio.to_thread`), and each batch is bounded, so the event
loop (and with it the grading API) only ever handles a few thousand lines per tick. Per run, at
most `max_events` log/action events and `max_bytes` of their text are stored; past that the run
gets one `log truncated` event, later lines are still read (offsets advance, usage actions still
count toward token budgets) but not stored, and a final event says how many were dropped. The full
log stays in its file in the attempt's log folder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from autorl_tui.instrument.filetail import FileTail

DEFAULT_MAX_EVENTS = 100_000
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
BATCH_LINES = 1000                  # stored lines per tick (below the store's auto-flush of 2000 rows)
BATCH_BYTES = 4 * 1024 * 1024       # bytes read per stream per tick once nothing more is stored
STORED_BATCH_BYTES = 512 * 1024     # ... and while lines are still stored (1,000 lines are rarely more)
STORED_KINDS = ("stdout", "stderr", "action")


@dataclass
class Batch:
    streams: list[tuple[str, list[str]]] = field(default_factory=list)   # (stream, its lines to store), in order
    read: list[str] = field(default_factory=list)                # every line read, stored or not (metrics)
    actions: list = field(default_factory=list)                  # (action, store it?) pairs
    dropped_lines: int = 0
    truncated_now: bool = False       # this batch crossed the cap
    exhausted: bool = True            # both files were read to their end

    @property
    def lines(self) -> list[tuple[str, str]]:
        """The lines to store as (stream, line) pairs, in order."""
        return [(stream, line) for stream, lines in self.streams for line in lines]


class LogIngest:
    def __init__(self, out_tail: FileTail, err_tail: FileTail, parser, *, stored_events: int, stored_bytes: int,
                 max_events: int = DEFAULT_MAX_EVENTS, max_bytes: int = DEFAULT_MAX_BYTES):
        self.out_tail, self.err_tail, self.parser = out_tail, err_tail, parser
        self.stored_events, self.stored_bytes = stored_events, stored_bytes
        self.max_events, self.max_bytes = max_events, max_bytes
        self.dropped_lines = 0

    @property
    def capped(self) -> bool:
        return self.stored_events >= self.max_events or self.stored_bytes >= self.max_bytes

    def _take(self, text: str) -> bool:
        """Whether one more event of this text fits under the cap (and count it when it does)."""
        if self.capped:
            return False
        size = len(text)
        if self.stored_events + 1 > self.max_events or self.stored_bytes + size > self.max_bytes:
            self.stored_events = self.max_events    # capped from here on: one cut, not a ragged edge
            return False
        self.stored_events += 1
        self.stored_bytes += size
        return True

    def _take_all(self, lines: list[str]) -> bool:
        """Whether all these lines fit under the cap (and count them when they do)."""
        size = sum(map(len, lines))
        if self.stored_events + len(lines) > self.max_events or self.stored_bytes + size > self.max_bytes:
            return False
        self.stored_events += len(lines)
        self.stored_bytes += size
        return True

    def read_batch(self, final: bool) -> Batch:
        """One bounded batch of both streams (run in a thread; one call at a time)."""
        batch = Batch()
        was_capped = self.capped
        for stream, tail in (("stdout", self.out_tail), ("stderr", self.err_tail)):
            if self.capped:
                lines = tail.read_lines(final=final, max_bytes=BATCH_BYTES)
            else:
                lines = tail.read_lines(final=final, max_lines=BATCH_LINES, max_bytes=STORED_BATCH_BYTES)
            batch.exhausted = batch.exhausted and tail.exhausted
            batch.read.extend(lines)
            if self.parser is None and self._take_all(lines):     # the usual case: all of them, one count
                if lines:
                    batch.streams.append((stream, lines))
                continue
            kept: list[str] = []
            for line in lines:
                if self._take(line):
                    kept.append(line)
                else:
                    batch.dropped_lines += 1
                if self.parser is not None and stream == "stdout":
                    for action in self.parser.feed(line):
                        batch.actions.append((action, self._take(_action_text(action))))
            if kept:
                batch.streams.append((stream, kept))
        if final and batch.exhausted and self.parser is not None:
            for action in self.parser.finish():     # calls whose results never came (killed mid-command)
                batch.actions.append((action, self._take(_action_text(action))))
        self.dropped_lines += batch.dropped_lines
        batch.truncated_now = self.capped and not was_capped
        return batch


def _action_text(action) -> str:
    """What storing the action costs: its summary (the message) and its data."""
    data = action.to_dict() if hasattr(action, "to_dict") else dict(action)
    summary = action.summary() if hasattr(action, "summary") else ""
    return summary + json.dumps(data, default=str)

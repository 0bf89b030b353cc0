"""A virtualized, bounded log view (Textual Line API).

Lines live in a ring (`collections.deque` with `maxlen`): memory stays bounded however many lines
an agent writes, and only the lines in view are rendered (`render_line`). The view follows the
tail until the operator scrolls up or presses `f`; it keeps its place when old lines fall out of
the ring. Search highlights matches and jumps between them.
"""

from __future__ import annotations

from collections import deque
from typing import Iterable, Iterator, NamedTuple

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget

from autorl_tui.tui.formatting import fmt_offset

# Line categories (events.kind): each is styled by the component class `log-view--<kind>`, a line
# at level error/warning by `log-view--level-<level>` instead; an unknown kind stays unstyled.
KINDS = ("stdout", "stderr", "harness", "operator", "action", "grading", "submission", "state", "error")
LEVELS = ("error", "warning")
KIND_WIDTH = max(map(len, KINDS))     # "submission": categories are never cut
MAX_WIDTH = 2000
_CONTROL = {i: " " for i in range(32)}
_CONTROL[ord("\t")] = "    "


class LogLine(NamedTuple):
    ts: float
    kind: str
    level: str
    message: str
    seq: int = 0      # the client's receive number (0 for lines read from the store)


class LogLines:
    """The ring of lines, read as `LogLine`s but kept as plain tuples: the garbage collector stops
    tracking a tuple of numbers and strings, so a full ring (20,000 lines) adds nothing to the
    pause of a full collection (under a flood those pauses were the console's slowest frames)."""

    def __init__(self, capacity: int):
        self._ring: deque[tuple] = deque(maxlen=capacity)

    def __len__(self) -> int:
        return len(self._ring)

    def __getitem__(self, index: int) -> LogLine:
        return LogLine._make(self._ring[index])

    def __iter__(self) -> Iterator[LogLine]:
        return map(LogLine._make, self._ring)

    def extend(self, lines: Iterable[LogLine]) -> None:
        self._ring.extend(map(tuple, lines))

    def clear(self) -> None:
        self._ring.clear()

    def messages(self) -> Iterator[str]:
        return (row[3] for row in self._ring)


def clean(message: str) -> str:
    """One display line: no control characters (they would break the terminal layout)."""
    if "\n" in message:
        message = message.rstrip("\n").replace("\r\n", "\n").replace("\n", " ⏎ ")
    return message.translate(_CONTROL)


class LogView(ScrollView, can_focus=True):
    """Colours are component classes, so a theme or the app's CSS restyles them, e.g.
    `LogView > .log-view--stderr { color: $error; }`."""

    COMPONENT_CLASSES = {"log-view--stamp", "log-view--kind", "log-view--match", "log-view--current-match",
                         *(f"log-view--{kind}" for kind in KINDS), *(f"log-view--level-{lv}" for lv in LEVELS)}
    DEFAULT_CSS = """
    LogView { background: $surface; }
    LogView > .log-view--stamp, LogView > .log-view--kind { text-style: dim; }
    LogView > .log-view--stderr { color: ansi_bright_red; }
    LogView > .log-view--harness { color: ansi_cyan; }
    LogView > .log-view--operator { color: ansi_yellow; }
    LogView > .log-view--action { color: ansi_magenta; }
    LogView > .log-view--grading { color: ansi_green; }
    LogView > .log-view--submission { color: ansi_green; text-style: bold; }
    LogView > .log-view--state { color: ansi_yellow; }
    LogView > .log-view--error, LogView > .log-view--level-error { color: ansi_red; text-style: bold; }
    LogView > .log-view--level-warning { color: ansi_yellow; }
    LogView > .log-view--match { text-style: bold underline; }
    LogView > .log-view--current-match { text-style: bold reverse; }
    """
    BINDINGS = [Binding("end", "follow_tail", "Tail", show=False)]   # the Run screen lists it

    follow: reactive[bool] = reactive(True)

    def __init__(self, capacity: int = 20_000, origin: float | None = None, **kwargs):
        super().__init__(**kwargs)
        self.capacity = capacity
        self.lines = LogLines(capacity)
        self.total = 0            # lines ever appended (the ring holds the last `capacity`)
        self.origin = origin      # timestamps are shown as offsets from this (the run's start)
        self._max_width = 0
        self._moving = False      # our own scrolling must not switch following off
        self.search_term: str | None = None
        self.match_index: int | None = None   # ring index of the current match
        self.match_rank = 0       # the current match is the match_rank-th of match_total (as of the last jump)
        self.match_total = 0
        # Rendered lines by (line number since the first, scroll x, width, highlight): following
        # the tail shifts every line up a row; each is rendered once, not on every frame.
        self._strips: LRUCache[tuple, Strip] = LRUCache(256)

    # ------------------------------------------------------------------ data
    def set_origin(self, origin: float | None) -> None:
        if origin != self.origin:
            self.origin = origin
            self._strips.clear()
            self.refresh()

    def clear(self) -> None:
        self.lines.clear()
        self._strips.clear()
        self.total = 0
        self._max_width = 0
        self.virtual_size = Size(0, 0)
        self.refresh()

    def append_lines(self, new: list[LogLine]) -> None:
        if not new:
            return
        before = len(self.lines)
        self.lines.extend(new)
        self.total += len(new)
        dropped = before + len(new) - len(self.lines)
        width = max((len(line.message) for line in new[-2000:]), default=0) + 12
        self._max_width = min(MAX_WIDTH, max(self._max_width, width))
        self._set_virtual_size(Size(self._max_width, len(self.lines)))
        if self.match_index is not None:
            self.match_index -= dropped
            if self.match_index < 0:
                self.match_index = None
        self._moving = True
        try:
            if self.follow:
                self._scroll_tail()
            elif dropped:
                self.scroll_to(y=max(0, self.scroll_y - dropped), animate=False, immediate=True)
        finally:
            self._moving = False
        # Paused with the view full, new lines land below it: the lines shown did not change (the
        # scrollbar redraws itself), so a flood costs no repaint of the view.
        if self.follow or dropped or before < self.scroll_offset.y + self.scrollable_content_region.height:
            self.refresh()

    def _set_virtual_size(self, size: Size) -> None:
        """Grow the scrollable area without a layout pass of the whole screen (assigning
        `virtual_size` lays out everything, every batch of a flood); only when a scrollbar
        appears or goes is a layout needed."""
        if size == self.virtual_size:
            return
        if not self.is_mounted:
            self.virtual_size = size
            return
        bars = (self.show_vertical_scrollbar, self.show_horizontal_scrollbar)
        self.set_reactive(Widget.virtual_size, size)
        self._scroll_update(size)
        if (self.show_vertical_scrollbar, self.show_horizontal_scrollbar) != bars:
            self.refresh(layout=True)

    # ------------------------------------------------------------------ following and scrolling
    def _scroll_tail(self) -> None:
        self._moving = True
        try:
            # force: before the first layout the scrollbars (and so scrolling) are not enabled yet
            self.scroll_to(y=max(0, len(self.lines) - self.scrollable_content_region.height), animate=False,
                           immediate=True, force=True)
        finally:
            self._moving = False

    def watch_follow(self, follow: bool) -> None:
        if follow:
            self._scroll_tail()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if not self._moving and new < old and self.follow:
            self.follow = False          # the operator scrolled up: stop following

    def on_resize(self) -> None:
        if self.follow:
            self.watch_follow(True)

    def action_follow_tail(self) -> None:
        self.follow = True

    def pointed_line(self) -> LogLine | None:
        """The line `v` shows in full: the current search match, else the bottom line in view."""
        if not self.lines:
            return None
        if self.match_index is not None:
            return self.lines[self.match_index]
        bottom = int(self.scroll_y) + self.scrollable_content_region.height - 1
        return self.lines[max(0, min(len(self.lines) - 1, bottom))]

    # ------------------------------------------------------------------ search
    def search(self, term: str | None, backwards: bool = False) -> bool:
        """Jump to the next line containing `term` (case-insensitive). Returns False if none."""
        if term is not None:
            if term != self.search_term:
                self.match_index = None
            self.search_term = term or None
        if not self.search_term or not self.lines:
            self.match_total = self.match_rank = 0
            self.refresh()
            return False
        needle = self.search_term.lower()
        n = len(self.lines)
        if self.match_index is None:
            start = n - 1 if backwards else max(0, int(self.scroll_y))
            if backwards:
                start = min(n - 1, int(self.scroll_y) + self.scrollable_content_region.height - 1)
        else:
            start = self.match_index + (-1 if backwards else 1)
        order = range(start, -1, -1) if backwards else range(start, n)
        for i in order:
            if needle in self.lines[i].message.lower():
                self.match_index = i
                hits = [needle in message.lower() for message in self.lines.messages()]
                self.match_total, self.match_rank = sum(hits), sum(hits[:i + 1])
                self.follow = False
                self._moving = True
                try:
                    self.scroll_to(y=max(0, i - self.scrollable_content_region.height // 2), animate=False,
                                   immediate=True)
                finally:
                    self._moving = False
                self.refresh()
                return True
        if self.match_index is None:
            self.match_total = self.match_rank = 0
        self.refresh()
        return False

    # ------------------------------------------------------------------ rendering
    def _part(self, name: str) -> Style:
        """What the CSS of component class `log-view--NAME` sets (cached by Textual until the CSS changes)."""
        return self.get_component_rich_style(f"log-view--{name}", partial=True)

    def _line_style(self, line: LogLine) -> Style:
        if line.level in LEVELS:
            return self._part(f"level-{line.level}")
        return self._part(line.kind) if line.kind in KINDS else Style()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()          # a theme or CSS change restyles every line

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        if index >= len(self.lines):
            return Strip.blank(width, self.rich_style)
        line = self.lines[index]
        term = self.search_term
        lit = bool(term) and term.lower() in line.message.lower()
        key = (self.total - len(self.lines) + index, scroll_x, width, term if lit else None,
               lit and index == self.match_index)
        strip = self._strips.get(key)
        if strip is None:
            strip = self._strips[key] = self._render_log_line(line, index, scroll_x, width)
        return strip

    def _render_log_line(self, line: LogLine, index: int, scroll_x: int, width: int) -> Strip:
        base = self.rich_style
        message = clean(line.message)
        if message.startswith(line.kind + " "):      # "state queued → preparing": the kind column says it
            message = message[len(line.kind) + 1:]
        style = base + self._line_style(line)
        stamp = fmt_offset(line.ts - self.origin) if self.origin else ""
        segments = [Segment(f"{stamp:>9} ", base + self._part("stamp")),
                    Segment(f"{line.kind:<{KIND_WIDTH}} ", base + self._part("kind"))]
        term = self.search_term
        if term and term.lower() in message.lower():
            low, needle, pos = message.lower(), term.lower(), 0
            match_style = style + self._part("current-match" if index == self.match_index else "match")
            while (hit := low.find(needle, pos)) >= 0:
                segments.append(Segment(message[pos:hit], style))
                segments.append(Segment(message[hit:hit + len(term)], match_style))
                pos = hit + len(term)
            segments.append(Segment(message[pos:], style))
        else:
            segments.append(Segment(message, style))
        return Strip(segments).crop_extend(scroll_x, scroll_x + width, base)

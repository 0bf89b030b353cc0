"""The parser interface: a stateful object fed one stdout line at a time."""

from __future__ import annotations

import difflib
import json
from typing import Any

from autorl_tui.instrument.actions import Action


class StreamParser:
    """`feed(line)` returns the actions that line completes; `finish()` flushes what is pending
    (a tool call whose result never came, buffered message chunks) when the stream ends."""

    output_format = ""

    def feed(self, line: str) -> list[Action]:
        raise NotImplementedError

    def finish(self) -> list[Action]:
        return []

    def feed_all(self, lines) -> list[Action]:
        out: list[Action] = []
        for line in lines:
            out.extend(self.feed(line))
        out.extend(self.finish())
        return out


class JsonLinesParser(StreamParser):
    """One JSON object per line. Blank lines are skipped, a line that is not JSON becomes a
    `malformed` action, a JSON value that is not an object becomes `raw`; objects go to `on_event`."""

    def feed(self, line: str) -> list[Action]:
        stripped = line.strip()
        if not stripped:
            return []
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError as exc:
            return self.on_text(stripped, f"not JSON: {exc.msg} at column {exc.colno}")
        if not isinstance(obj, dict):
            return [Action("raw", event=obj)]
        try:
            return self.on_event(obj)
        except (TypeError, AttributeError, KeyError, ValueError) as exc:
            # An event of a known type with an unexpected shape: keep it whole rather than lose it.
            return [Action("raw", event=obj, text=f"unexpected shape: {exc}")]

    def on_text(self, line: str, why: str) -> list[Action]:
        return [Action("malformed", line=line[:2000], text=why)]

    def on_event(self, event: dict[str, Any]) -> list[Action]:
        raise NotImplementedError


def text_of(content: Any) -> str:
    """Text from the shapes tool results and messages come in: a string, a list of parts
    ({"type": "text", "text": ...} or strings), or a dict with text/content."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(t for t in (text_of(c) for c in content) if t)
    if isinstance(content, dict):
        for key in ("text", "content", "output"):
            if key in content:
                return text_of(content[key])
        return ""
    return str(content)


def edit_diff(path: str, old: str, new: str, context: int = 2) -> str:
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=f"a/{path}", tofile=f"b/{path}", n=context)
    return "".join(lines)


def as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None

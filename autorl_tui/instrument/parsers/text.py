"""`text`: plain stdout. Lines are already recorded as stdout events by the engine; a plain-text
agent has no structure to normalize, so this parser yields no actions."""

from __future__ import annotations

from autorl_tui.instrument.actions import Action
from autorl_tui.instrument.parsers.base import StreamParser


class TextParser(StreamParser):
    output_format = "text"

    def feed(self, line: str) -> list[Action]:
        return []

"""Stream parsers: one module per agent output format, each turning stdout lines into normalized
actions (`engine/instrument/actions.py`).

    parser = get_parser(spec.output_format)     # a new, stateful parser per attempt
    for line in stdout: actions = parser.feed(line)
    actions = parser.finish()                   # when the agent's stdout ends

Importing this package registers every format name with `catalog.agents`, so agent specs using
them validate.
"""

from __future__ import annotations

from autorl_tui.catalog.agents import register_output_format
from autorl_tui.engine.instrument.parsers.base import StreamParser
from autorl_tui.engine.instrument.parsers.claude_stream_json import ClaudeStreamJsonParser
from autorl_tui.engine.instrument.parsers.codex_json import CodexJsonParser
from autorl_tui.engine.instrument.parsers.gemini_stream_json import GeminiStreamJsonParser
from autorl_tui.engine.instrument.parsers.opencode_json import OpencodeJsonParser
from autorl_tui.engine.instrument.parsers.openhands import OpenHandsParser
from autorl_tui.engine.instrument.parsers.react_json import ReactJsonParser
from autorl_tui.engine.instrument.parsers.text import TextParser

PARSERS: dict[str, type[StreamParser]] = {
    p.output_format: p for p in (TextParser, ClaudeStreamJsonParser, CodexJsonParser,
                                 GeminiStreamJsonParser, OpencodeJsonParser, OpenHandsParser,
                                 ReactJsonParser)
}

for _name in PARSERS:
    register_output_format(_name)


def output_formats() -> list[str]:
    return sorted(PARSERS)


def get_parser(output_format: str) -> StreamParser:
    try:
        return PARSERS[output_format]()
    except KeyError:
        raise ValueError(f"no parser for output_format {output_format!r}; "
                         f"known: {', '.join(output_formats())}") from None


__all__ = ["PARSERS", "StreamParser", "get_parser", "output_formats"]

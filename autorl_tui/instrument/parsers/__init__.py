"""Stream parsers: one module per agent output format, each turning stdout lines into normalized
actions (`instrument/actions.py`). Formats are plugins (`autorl_tui/registry.py`, kind
`output_parsers`: a name -> a `StreamParser` class whose `output_format` is that name).

    parser = get_parser(spec.output_format)     # a new, stateful parser per attempt
    for line in stdout: actions = parser.feed(line)
    actions = parser.finish()                   # when the agent's stdout ends
"""

from __future__ import annotations

from autorl_tui import registry
from autorl_tui.instrument.parsers.base import StreamParser


def output_formats() -> list[str]:
    return registry.names("output_parsers")


def get_parser(output_format: str) -> StreamParser:
    if output_format not in registry.entries("output_parsers"):
        raise ValueError(f"no parser for output_format {output_format!r}; "
                         f"known: {', '.join(output_formats())}")
    return registry.load("output_parsers", output_format)()


__all__ = ["StreamParser", "get_parser", "output_formats"]

"""Filling an agent spec's command template.

Placeholders are `{name}` for the names in PLACEHOLDERS; any other brace is left alone (a command
may carry TOML or JSON, e.g. Codex's `-c 'model_providers.x={...}'`). In a shell-string command
every value is shell-quoted, so a path with spaces or a prompt file name cannot break the line;
in an argv-list command values are substituted as they are."""

from __future__ import annotations

import re
import shlex
from typing import Mapping

from autorl_tui.exitcodes import UsageError

PLACEHOLDERS = ("agent_dir", "python", "driver", "driver_url", "workspace", "prompt_file")
_PATTERN = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")


def render_command(command: str | list[str], values: Mapping[str, str | None]) -> str | list[str]:
    """Fill `command` from `values` (missing or None values become the empty string)."""
    def fill(text: str, quote: bool) -> str:
        def sub(m: re.Match) -> str:
            value = values.get(m.group(1))
            value = "" if value is None else str(value)
            return shlex.quote(value) if quote else value
        return _PATTERN.sub(sub, text)

    if isinstance(command, str):
        return fill(command, quote=True)
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        return [fill(c, quote=False) for c in command]
    raise UsageError(f"an agent command must be a string or a list of strings, got {command!r}")


def placeholders_used(command: str | list[str]) -> set[str]:
    parts = [command] if isinstance(command, str) else list(command)
    return {m.group(1) for p in parts for m in _PATTERN.finditer(p)}

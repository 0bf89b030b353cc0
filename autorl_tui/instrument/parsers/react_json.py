"""`react_json`: the built-in react agent's stream (ours). One JSON object a line:
{"type": <action kind>, ...the action's fields} (see actions.py), e.g.
{"type":"shell","command":"ls","exit_code":0,"output":"..."} or
{"type":"usage","tokens_in":812,"tokens_out":64}. {"type":"start",...} opens the stream (kept raw)."""

from __future__ import annotations

from typing import Any

from autorl_tui.instrument.actions import ACTION_KINDS, Action
from autorl_tui.instrument.parsers.base import JsonLinesParser


class ReactJsonParser(JsonLinesParser):
    output_format = "react_json"

    def on_event(self, ev: dict[str, Any]) -> list[Action]:
        data = dict(ev)
        kind = data.pop("type", None)
        if kind not in ACTION_KINDS or kind in ("raw", "malformed"):
            return [Action("raw", event=ev)]
        try:
            return [Action.from_dict({"kind": kind, **data})]
        except (TypeError, ValueError) as exc:
            return [Action("raw", event=ev, text=f"unexpected shape: {exc}")]

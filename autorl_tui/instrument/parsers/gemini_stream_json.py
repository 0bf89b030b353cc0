"""`gemini_stream_json`: Gemini CLI `gemini -p ... --output-format stream-json`.

Lines: {"type":"init","session_id","model"}, {"type":"message","role","content","delta"?},
{"type":"tool_use","tool_name","tool_id","parameters"}, {"type":"tool_result","tool_id",
"status":"success"|"error","output"?,"error"?:{"type","message"}}, {"type":"error","severity",
"message"}, {"type":"result","status","error"?,"stats":{"total_tokens","input_tokens",
"output_tokens","cached","input","duration_ms","tool_calls"}} (stats are session totals).
Assistant message chunks (delta) are joined into one message. A shell result's exit code is
taken from an "Exit Code: N" in its output when there is one, else left unknown (null).
"""

from __future__ import annotations

import re
from typing import Any

from autorl_tui.instrument.actions import Action, CumulativeUsage
from autorl_tui.instrument.parsers.base import JsonLinesParser, as_int, text_of

SHELL_TOOLS = {"run_shell_command", "shell"}
EDIT_TOOLS = {"write_file", "replace", "edit"}
_EXIT = re.compile(r"Exit Code:\s*(-?\d+)")


class GeminiStreamJsonParser(JsonLinesParser):
    output_format = "gemini_stream_json"

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.pending: dict[str, tuple[str, dict]] = {}
        self.usage = CumulativeUsage()

    def _flush(self) -> list[Action]:
        if not self.chunks:
            return []
        text, self.chunks = "".join(self.chunks), []
        return [Action("message", role="assistant", text=text)] if text.strip() else []

    def on_event(self, ev: dict[str, Any]) -> list[Action]:
        t = ev.get("type")
        if t == "message":
            if ev.get("role") != "assistant":
                return []
            self.chunks.append(text_of(ev.get("content")))
            return [] if ev.get("delta") else self._flush()
        out = self._flush()
        if t == "tool_use":
            name, params = ev.get("tool_name"), ev.get("parameters") or {}
            self.pending[ev.get("tool_id")] = (name, params)
            out.append(Action("tool_call", name=name, input=params, call_id=ev.get("tool_id")))
        elif t == "tool_result":
            out.append(self._result(ev))
        elif t == "error":
            out.append(Action("error", text=str(ev.get("message", "")), extra={"severity": ev.get("severity")}))
        elif t == "result":
            s = ev.get("stats") or {}
            usage = self.usage.delta(tokens_in=s.get("input_tokens"), tokens_out=s.get("output_tokens"),
                                     cache_read=s.get("cached"))
            if usage:
                out.append(usage)
            if ev.get("status") == "error":
                out.append(Action("error", text=text_of((ev.get("error") or {}).get("message")) or "error"))
        else:
            out.append(Action("raw", event=ev))      # init and anything newer
        return out

    def _result(self, ev: dict[str, Any]) -> Action:
        call_id = ev.get("tool_id")
        name, params = self.pending.pop(call_id, (None, {}))
        ok = ev.get("status") == "success"
        output = ev.get("output") if ev.get("output") is not None else text_of((ev.get("error") or {}).get("message"))
        if name in SHELL_TOOLS:
            # "success" means the tool ran, not that the command exited 0: the exit code is known
            # only when the output states it.
            m = _EXIT.search(output or "")
            code = as_int(m.group(1)) if m else None
            return Action("shell", command=params.get("command"), exit_code=code, output=output,
                          call_id=call_id, is_error=None if ok else True)
        if name in EDIT_TOOLS and ok:
            path = params.get("file_path") or params.get("absolute_path") or params.get("path")
            if name == "write_file":
                summary = f"wrote {len(params.get('content') or '')} chars"
            else:
                summary = "replace"
            return Action("file_edit", path=path, summary_text=summary, call_id=call_id)
        return Action("tool_result", name=name, output=output, is_error=not ok, call_id=call_id)

    def finish(self) -> list[Action]:
        return self._flush()

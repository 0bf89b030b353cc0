"""`opencode_json`: opencode `opencode run --format json`.

Lines: {"type":"step_start"|"text"|"reasoning"|"tool_use"|"step_finish"|"error","timestamp",
"sessionID","part":{...}}. A tool_use line carries the finished call: part {"tool","callID",
"state":{"status":"completed"|"error","input","output","error"?,"metadata"?:{"exit"}}}.
step_finish parts carry per-step "tokens":{"input","output","reasoning","cache":{"read","write"}}
and "cost" (USD): increments. An error line: {"type":"error","error":{"name","data":{"message"}}}.
"""

from __future__ import annotations

from typing import Any

from autorl_tui.instrument.actions import Action
from autorl_tui.instrument.parsers.base import JsonLinesParser, as_int, edit_diff, text_of

SHELL_TOOLS = {"bash"}
EDIT_TOOLS = {"edit", "write", "patch", "multiedit"}


class OpencodeJsonParser(JsonLinesParser):
    output_format = "opencode_json"

    def on_event(self, ev: dict[str, Any]) -> list[Action]:
        t = ev.get("type")
        part = ev.get("part") or {}
        if t == "step_start":
            return []
        if t == "text":
            return [Action("message", role="assistant", text=part.get("text", ""))]
        if t == "reasoning":
            return [Action("reasoning", text=part.get("text", ""))]
        if t == "tool_use":
            return self._tool(part)
        if t == "step_finish":
            tok = part.get("tokens") or {}
            cache = tok.get("cache") or {}
            cache_read, cache_write = cache.get("read") or 0, cache.get("write") or 0
            # opencode's `input` excludes cached tokens; ours counts every prompt token.
            return [Action("usage", tokens_in=(tok.get("input") or 0) + cache_read + cache_write,
                           tokens_out=(tok.get("output") or 0) + (tok.get("reasoning") or 0),
                           cache_read=cache_read, cache_write=cache_write, cost_usd=part.get("cost"))]
        if t == "error":
            err = ev.get("error") or {}
            msg = text_of((err.get("data") or {}).get("message")) or err.get("name") or "error"
            return [Action("error", text=msg, extra={"name": err.get("name")})]
        return [Action("raw", event=ev)]

    def _tool(self, part: dict[str, Any]) -> list[Action]:
        tool, call_id = part.get("tool"), part.get("callID")
        state = part.get("state") or {}
        inp = state.get("input") or {}
        failed = state.get("status") == "error"
        output = state.get("output") if not failed else text_of(state.get("error"))
        out = [Action("tool_call", name=tool, input=inp, call_id=call_id)]
        if state.get("status") not in ("completed", "error"):
            return out
        if tool in SHELL_TOOLS:
            meta = state.get("metadata") or {}
            code = as_int(meta.get("exit"))
            out.append(Action("shell", command=inp.get("command"), output=output, call_id=call_id,
                              exit_code=code if code is not None else (None if failed else 0),
                              is_error=True if failed else None))
        elif tool in EDIT_TOOLS and not failed:
            path = inp.get("filePath") or inp.get("path")
            diff = None
            if "oldString" in inp:
                diff = edit_diff(path or "file", inp.get("oldString") or "", inp.get("newString") or "")
            elif (state.get("metadata") or {}).get("diff"):
                diff = state["metadata"]["diff"]
            out.append(Action("file_edit", path=path, diff=diff, summary_text=tool, call_id=call_id))
        else:
            out.append(Action("tool_result", name=tool, output=output, is_error=failed, call_id=call_id))
        return out

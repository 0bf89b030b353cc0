"""`claude_stream_json`: Claude Code `claude -p --output-format stream-json --verbose`.

Lines: {"type":"system","subtype":"init",...}; {"type":"assistant","message":{"id",
"content":[text|thinking|tool_use blocks],"usage":{...}}} (one line per content block, the
same message id repeated); {"type":"user","message":{"content":[{"type":"tool_result",
"tool_use_id","content","is_error"}]}}; {"type":"result","subtype":"success"|"error_...",
"is_error","total_cost_usd","usage":{...}}. Tool calls are paired with their results by id.
"""

from __future__ import annotations

import re
from typing import Any

from autorl_tui.instrument.actions import Action, CumulativeUsage
from autorl_tui.instrument.parsers.base import JsonLinesParser, as_int, edit_diff, text_of

SHELL_TOOLS = {"Bash"}
EDIT_TOOLS = {"Write", "Edit", "MultiEdit", "NotebookEdit"}
_EXIT = re.compile(r"^\s*(?:Error: )?Exit code (\d+)", re.IGNORECASE)


def _usage_totals(usage: dict[str, Any]) -> dict[str, int]:
    cache_read = usage.get("cache_read_input_tokens") or 0
    cache_write = usage.get("cache_creation_input_tokens") or 0
    return {"tokens_in": (usage.get("input_tokens") or 0) + cache_read + cache_write,
            "tokens_out": usage.get("output_tokens") or 0,
            "cache_read": cache_read, "cache_write": cache_write}


class ClaudeStreamJsonParser(JsonLinesParser):
    output_format = "claude_stream_json"

    def __init__(self) -> None:
        self.pending: dict[str, tuple[str, dict]] = {}    # tool_use id -> (name, input)
        self.message_usage: dict[str, dict[str, int]] = {}  # message id -> its latest usage
        self.usage = CumulativeUsage()

    def on_event(self, ev: dict[str, Any]) -> list[Action]:
        t = ev.get("type")
        if t == "assistant":
            return self._assistant(ev.get("message") or {})
        if t == "user":
            return self._user(ev)
        if t == "result":
            return self._result(ev)
        if t == "stream_event":           # partial deltas (--include-partial-messages): the
            return []                     # complete blocks follow as assistant lines
        return [Action("raw", event=ev)]  # system/init and anything newer, kept verbatim

    def _assistant(self, msg: dict[str, Any]) -> list[Action]:
        out: list[Action] = []
        for block in msg.get("content") or []:
            bt = block.get("type")
            if bt == "text" and block.get("text", "").strip():
                out.append(Action("message", role="assistant", text=block["text"]))
            elif bt in ("thinking", "redacted_thinking"):
                out.append(Action("reasoning", text=block.get("thinking") or "[redacted]"))
            elif bt in ("tool_use", "server_tool_use"):
                name, inp = block.get("name"), block.get("input") or {}
                self.pending[block.get("id")] = (name, inp)
                out.append(Action("tool_call", name=name, input=inp, call_id=block.get("id")))
            elif bt != "text":
                out.append(Action("raw", event=block))
        # Usage rides on every line of a message (one line per block): count each message once,
        # as an increment over what this message already reported.
        if msg.get("usage") and msg.get("id"):
            totals = _usage_totals(msg["usage"])
            before = self.message_usage.get(msg["id"], {})
            inc = {k: v - before.get(k, 0) for k, v in totals.items() if v - before.get(k, 0) > 0}
            self.message_usage[msg["id"]] = totals
            if inc:
                for k, v in inc.items():
                    self.usage.seen[k] += v
                out.append(Action("usage", **inc))
        return out

    def _user(self, ev: dict[str, Any]) -> list[Action]:
        content = (ev.get("message") or {}).get("content")
        if not isinstance(content, list):
            return []                      # the prompt itself
        out = []
        for block in content:
            if block.get("type") != "tool_result":
                continue
            call_id = block.get("tool_use_id")
            name, inp = self.pending.pop(call_id, (None, {}))
            output = text_of(block.get("content"))
            is_error = bool(block.get("is_error"))
            out.append(self._completed(name, inp, output, is_error, call_id, ev.get("tool_use_result")))
        return out

    def _completed(self, name, inp, output, is_error, call_id, detail=None) -> Action:
        if name in SHELL_TOOLS:
            m = _EXIT.match(output or "")
            code = as_int(m.group(1)) if m else (None if is_error else 0)
            if isinstance(detail, dict) and detail.get("interrupted"):
                code = None
            return Action("shell", command=inp.get("command"), exit_code=code, output=output,
                          call_id=call_id, is_error=is_error or None)
        if name in EDIT_TOOLS and not is_error:
            path = inp.get("file_path") or inp.get("notebook_path")
            if name == "Edit":
                diff = edit_diff(path or "file", inp.get("old_string", ""), inp.get("new_string", ""))
                return Action("file_edit", path=path, diff=diff, summary_text="edit", call_id=call_id)
            if name == "MultiEdit":
                edits = inp.get("edits") or []
                diff = "".join(edit_diff(path or "file", e.get("old_string", ""), e.get("new_string", ""))
                               for e in edits)
                return Action("file_edit", path=path, diff=diff, summary_text=f"{len(edits)} edits",
                              call_id=call_id)
            content = inp.get("content") or inp.get("new_source") or ""
            return Action("file_edit", path=path, summary_text=f"wrote {len(content)} chars",
                          call_id=call_id)
        return Action("tool_result", name=name, output=output, is_error=is_error, call_id=call_id)

    def _result(self, ev: dict[str, Any]) -> list[Action]:
        out: list[Action] = []
        totals = _usage_totals(ev.get("usage") or {})
        usage = self.usage.delta(cost_usd=ev.get("total_cost_usd"), **totals)
        if usage:
            out.append(usage)
        if ev.get("is_error") or str(ev.get("subtype", "")).startswith("error"):
            text = ev.get("result") or ev.get("subtype") or "error"
            out.append(Action("error", text=str(text), extra={"subtype": ev.get("subtype"),
                                                             "num_turns": ev.get("num_turns")}))
        return out

    def finish(self) -> list[Action]:
        # Calls that never got a result (the agent was killed mid-command).
        out = []
        for call_id, (name, inp) in self.pending.items():
            if name in SHELL_TOOLS:
                out.append(Action("shell", command=inp.get("command"), exit_code=None,
                                  call_id=call_id, extra={"unfinished": True}))
        self.pending.clear()
        return out

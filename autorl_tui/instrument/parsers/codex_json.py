"""`codex_json`: Codex `codex exec --json`.

Lines: {"type":"thread.started","thread_id"}, {"type":"turn.started"}, {"type":"item.started"|
"item.updated"|"item.completed","item":{"id","type":"agent_message"|"reasoning"|
"command_execution"|"file_change"|"mcp_tool_call"|"web_search"|"todo_list"|"error",...}},
{"type":"turn.completed","usage":{"input_tokens","cached_input_tokens","output_tokens"}},
{"type":"turn.failed","error":{"message"}}, {"type":"error","message"}. Early releases named the
item kind `item_type` and the message `assistant_message`; both spellings are read.
"""

from __future__ import annotations

from typing import Any

from autorl_tui.instrument.actions import Action
from autorl_tui.instrument.parsers.base import JsonLinesParser, as_int, text_of


def _kind(item: dict[str, Any]) -> str:
    return item.get("type") or item.get("item_type") or ""


class CodexJsonParser(JsonLinesParser):
    output_format = "codex_json"

    def __init__(self) -> None:
        self.started: dict[str, dict] = {}    # item id -> started item (commands still running)

    def on_event(self, ev: dict[str, Any]) -> list[Action]:
        t = ev.get("type")
        if t in ("turn.started", "item.updated"):
            return []
        if t == "item.started":
            return self._started(ev.get("item") or {})
        if t == "item.completed":
            return self._completed(ev.get("item") or {})
        if t == "turn.completed":
            u = ev.get("usage") or {}
            return [Action("usage", tokens_in=u.get("input_tokens") or 0,
                           tokens_out=u.get("output_tokens") or 0,
                           cache_read=u.get("cached_input_tokens") or 0)]
        if t == "turn.failed":
            return [Action("error", text=text_of((ev.get("error") or {}).get("message")) or "turn failed")]
        if t == "error":
            return [Action("error", text=str(ev.get("message") or ev))]
        return [Action("raw", event=ev)]       # thread.started and anything newer

    def _started(self, item: dict[str, Any]) -> list[Action]:
        k = _kind(item)
        self.started[item.get("id")] = item
        if k == "command_execution":
            return [Action("tool_call", name="shell", input={"command": item.get("command")},
                           call_id=item.get("id"))]
        if k == "mcp_tool_call":
            return [Action("tool_call", name=f"{item.get('server')}.{item.get('tool')}",
                           input=item.get("arguments"), call_id=item.get("id"))]
        return []

    def _completed(self, item: dict[str, Any]) -> list[Action]:
        k = _kind(item)
        was_started = self.started.pop(item.get("id"), None) is not None
        if k in ("agent_message", "assistant_message"):
            return [Action("message", role="assistant", text=item.get("text", ""))]
        if k == "reasoning":
            return [Action("reasoning", text=item.get("text", ""))]
        if k == "command_execution":
            out = [] if was_started else [Action("tool_call", name="shell",
                                                 input={"command": item.get("command")},
                                                 call_id=item.get("id"))]
            out.append(Action("shell", command=item.get("command"), exit_code=as_int(item.get("exit_code")),
                              output=item.get("aggregated_output"), call_id=item.get("id"),
                              is_error=True if item.get("status") in ("failed", "declined") else None))
            return out
        if k == "file_change":
            failed = item.get("status") == "failed"
            return [Action("file_edit", path=c.get("path"), summary_text=c.get("kind"),
                           call_id=item.get("id"), is_error=True if failed else None)
                    for c in item.get("changes") or []]
        if k == "mcp_tool_call":
            err = item.get("error")
            return [Action("tool_result", name=f"{item.get('server')}.{item.get('tool')}",
                           output=text_of(item.get("result")) or text_of(err),
                           is_error=bool(err) or item.get("status") == "failed", call_id=item.get("id"))]
        if k == "web_search":
            return [Action("tool_result", name="web_search", output=item.get("query"), call_id=item.get("id"))]
        if k == "error":
            return [Action("error", text=item.get("message", ""))]
        return [Action("raw", event=item)]       # todo_list and newer item kinds

    def finish(self) -> list[Action]:
        out = [Action("shell", command=i.get("command"), exit_code=None, call_id=i.get("id"),
                      output=i.get("aggregated_output") or None, extra={"unfinished": True})
               for i in self.started.values() if _kind(i) == "command_execution"]
        self.started.clear()
        return out

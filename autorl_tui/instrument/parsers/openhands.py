"""`openhands`: OpenHands headless JSON events (`openhands --headless --json -t TASK`).

Two event families are read:
- Software Agent SDK events (the current CLI): {"kind":"ActionEvent","tool_name","tool_call_id",
  "thought":[{"type":"text","text"}],"action":{"kind":..., "command"|"path"|"message",...}},
  {"kind":"ObservationEvent","tool_name","tool_call_id","observation":{"content","exit_code"|
  "metadata":{"exit_code"},"path","command"}}, {"kind":"MessageEvent","llm_message":{"role",
  "content"}}, {"kind":"AgentErrorEvent","error"}.
- V0 events (the older `openhands.core.main`): {"action":"run","args":{"command"},"id"},
  {"observation":"run","content","cause","extras":{"command","metadata":{"exit_code"}}}, plus
  message/think/edit/write/read/finish/error, and cumulative "llm_metrics".
The CLI may pretty-print an event over several lines (after a `--JSON Event--` marker): lines
are buffered until they form one JSON object. The CLI also prints human text between events
(banner, "Agent is working", a summary box): lines that do not start like JSON are left to the
stdout log, not reported as malformed.
"""

from __future__ import annotations

import json
from typing import Any

from autorl_tui.instrument.actions import Action, CumulativeUsage
from autorl_tui.instrument.parsers.base import JsonLinesParser, as_int, text_of

SHELL_TOOLS = {"execute_bash", "terminal", "bash", "run"}
EDIT_TOOLS = {"str_replace_editor", "file_editor", "edit", "write"}
EDIT_COMMANDS = {"create", "str_replace", "insert", "undo_edit", "edit", "write"}
MARKERS = {"--JSON Event--"}
MAX_BUFFERED_LINES = 5000


class OpenHandsParser(JsonLinesParser):
    output_format = "openhands"

    def __init__(self) -> None:
        self.buffer: list[str] = []
        self.pending: dict[Any, tuple[str, dict]] = {}   # call id -> (tool, input)
        self.usage = CumulativeUsage()

    def feed(self, line: str) -> list[Action]:
        stripped = line.strip()
        if stripped in MARKERS:
            return self._drop_buffer()
        if self.buffer or (stripped == "{"):
            self.buffer.append(line)
            text = "\n".join(self.buffer)
            try:
                obj = json.loads(text)
            except ValueError:
                if len(self.buffer) > MAX_BUFFERED_LINES:
                    return self._drop_buffer()
                return []
            self.buffer = []
            return super().feed(json.dumps(obj))
        return super().feed(line)

    def on_text(self, line: str, why: str) -> list[Action]:
        if not line.startswith(("{", "[")):
            return []
        return super().on_text(line, why)

    def _drop_buffer(self) -> list[Action]:
        out = []
        if self.buffer:
            out.append(Action("malformed", line="\n".join(self.buffer)[:2000],
                              text="multi-line JSON event never completed"))
        self.buffer = []
        return out

    def on_event(self, ev: dict[str, Any]) -> list[Action]:
        out = self._metrics(ev)
        kind = ev.get("kind")
        if kind:
            out += self._sdk(kind, ev)
        elif "action" in ev:
            out += self._v0_action(ev)
        elif "observation" in ev:
            out += self._v0_observation(ev)
        else:
            out.append(Action("raw", event=ev))
        return out

    def _metrics(self, ev: dict[str, Any]) -> list[Action]:
        m = ev.get("llm_metrics") or {}
        tok = m.get("accumulated_token_usage") or {}
        if not m:
            return []
        u = self.usage.delta(tokens_in=tok.get("prompt_tokens"), tokens_out=tok.get("completion_tokens"),
                             cache_read=tok.get("cache_read_tokens"), cost_usd=m.get("accumulated_cost"))
        return [u] if u else []

    # ---- Software Agent SDK ----
    def _sdk(self, kind: str, ev: dict[str, Any]) -> list[Action]:
        if kind == "ActionEvent":
            out = []
            thought = text_of(ev.get("thought"))
            if thought.strip():
                out.append(Action("reasoning", text=thought))
            action = ev.get("action") or {}
            tool = ev.get("tool_name") or action.get("kind")
            inp = {k: v for k, v in action.items() if k != "kind"}
            if action.get("kind") == "FinishAction" or tool == "finish":
                out.append(Action("message", role="assistant", text=text_of(action.get("message"))))
                return out
            call_id = ev.get("tool_call_id")
            self.pending[call_id] = (tool, inp)
            out.append(Action("tool_call", name=tool, input=inp, call_id=call_id))
            return out
        if kind == "ObservationEvent":
            obs = ev.get("observation") or {}
            call_id = ev.get("tool_call_id")
            tool, inp = self.pending.pop(call_id, (ev.get("tool_name"), {}))
            output = text_of(obs.get("content")) or text_of(obs.get("output"))
            is_error = bool(obs.get("is_error") or obs.get("error"))
            if tool in SHELL_TOOLS:
                code = obs.get("exit_code", (obs.get("metadata") or {}).get("exit_code"))
                return [Action("shell", command=obs.get("command") or inp.get("command"),
                               exit_code=as_int(code), output=output, call_id=call_id,
                               is_error=is_error or None)]
            if tool in EDIT_TOOLS and inp.get("command", "create") in EDIT_COMMANDS and not is_error:
                return [Action("file_edit", path=obs.get("path") or inp.get("path"),
                               diff=obs.get("diff"), summary_text=inp.get("command"), call_id=call_id)]
            return [Action("tool_result", name=tool, output=output, is_error=is_error, call_id=call_id)]
        if kind == "MessageEvent":
            msg = ev.get("llm_message") or {}
            if msg.get("role") != "assistant":
                return []
            return [Action("message", role="assistant", text=text_of(msg.get("content")))]
        if kind == "AgentErrorEvent":
            return [Action("error", text=text_of(ev.get("error")))]
        if kind in ("SystemPromptEvent", "ConversationStateUpdateEvent"):
            return []
        return [Action("raw", event=ev)]

    # ---- V0 ----
    def _v0_action(self, ev: dict[str, Any]) -> list[Action]:
        a, args = ev.get("action"), ev.get("args") or {}
        if a == "message":
            if ev.get("source") == "user":
                return []
            return [Action("message", role="assistant", text=args.get("content") or ev.get("message", ""))]
        if a == "think":
            return [Action("reasoning", text=args.get("thought", ""))]
        if a == "finish":
            return [Action("message", role="assistant",
                           text=args.get("final_thought") or text_of(args.get("outputs")) or ev.get("message", ""))]
        if a in ("system", "recall", "change_agent_state"):
            return []
        self.pending[ev.get("id")] = (a, args)
        return [Action("tool_call", name=a, input=args, call_id=str(ev.get("id")))]

    def _v0_observation(self, ev: dict[str, Any]) -> list[Action]:
        o, extras = ev.get("observation"), ev.get("extras") or {}
        cause = ev.get("cause")
        tool, args = self.pending.pop(cause, (o, {}))
        if o == "run":
            meta = extras.get("metadata") or {}
            return [Action("shell", command=extras.get("command") or args.get("command"),
                           exit_code=as_int(meta.get("exit_code", extras.get("exit_code"))),
                           output=ev.get("content"), call_id=str(cause))]
        if o in ("edit", "write"):
            return [Action("file_edit", path=extras.get("path") or args.get("path"), diff=extras.get("diff"),
                           summary_text=o, call_id=str(cause))]
        if o == "error":
            return [Action("error", text=ev.get("content") or ev.get("message", ""))]
        if o in ("agent_state_changed", "null", "recall"):
            return []
        return [Action("tool_result", name=o, output=ev.get("content"), call_id=str(cause))]

    def finish(self) -> list[Action]:
        return self._drop_buffer()

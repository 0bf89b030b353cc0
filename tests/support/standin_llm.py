"""A scripted stand-in for paid LLM APIs, on 127.0.0.1, for tests of real agent clients.

It speaks the wire protocols our agent stacks use — Anthropic Messages (`POST /v1/messages`,
streamed; Claude Code), OpenAI Responses (`POST /v1/responses`, streamed; Codex), OpenAI Chat
Completions (`POST /v1/chat/completions`, plain or streamed; the react agent, opencode) and the
Gemini API (`POST /v1beta/models/M:streamGenerateContent?alt=sse`; Gemini CLI) —
and replays a script instead of thinking. The script is stateless over requests: the step to
play is the number of tool calls already in the conversation the client sends back, so retries
and side requests cannot derail it.

A step is `Step(shell="ls")` (a shell call through whichever shell tool the client offers:
Bash, exec_command/shell_command/shell, or our `shell`), `Step(tool="write_file", args={...})`
(a named tool; chat completions only) or `Step(text="...")` (a final answer). After the last
step the server answers `final_text`. Requests that offer no tools (titles, summaries) get "ok".
`stall_at_step=N, stall_s=S` makes the answer for step N wait S seconds (deadline tests).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Step:
    shell: str | None = None
    tool: str | None = None
    args: dict[str, Any] = field(default_factory=dict)
    text: str | None = None


USAGE = {"input": 100, "output": 20}


def _tool_names(tools) -> list[str]:
    out = []
    for t in tools or []:
        if isinstance(t, dict):
            out.append(t.get("name") or (t.get("function") or {}).get("name") or t.get("type"))
    return out


class StandinLLM:
    def __init__(self, steps: list[Step], final_text: str = "All done: ran the scripted steps.",
                 stall_at_step: int | None = None, stall_s: float = 0.0):
        self.steps = steps
        self.final_text = final_text
        self.stall_at_step = stall_at_step
        self.stall_s = stall_s
        self.requests: list[dict[str, Any]] = []     # {"path", "api", "step", "tools", "body"}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # ---- lifecycle ----
    def start(self) -> "StandinLLM":
        outer = self

        class Handler(_Handler):
            standin = outer

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- script ----
    def record(self, entry: dict) -> None:
        with self._lock:
            self.requests.append(entry)

    def step(self, done: int) -> Step | None:
        if self.stall_at_step is not None and done == self.stall_at_step:
            time.sleep(self.stall_s)
        return self.steps[done] if done < len(self.steps) else None

    def scripted_requests(self, api: str) -> list[dict]:
        return [r for r in self.requests if r["api"] == api and r["tools"]]


def _shell_call(tools: list[str], cmd: str) -> tuple[str | None, dict | None]:
    """Whichever shell-like tool the client offered, and its argument shape."""
    for name, args in (("Bash", {"command": cmd}), ("exec_command", {"cmd": cmd}),
                       ("run_shell_command", {"command": cmd}), ("bash", {"command": cmd, "description": "step"}),
                       ("terminal", {"command": cmd, "security_risk": "LOW"}),
                       ("execute_bash", {"command": cmd, "security_risk": "LOW"}),
                       ("shell_command", {"command": cmd}), ("shell", {"command": cmd})):
        if name in tools:
            if name == "shell" and "write_file" not in tools:    # Codex's older argv-style shell
                return name, {"command": ["bash", "-lc", cmd]}
            return name, args
    return None, None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    standin: StandinLLM

    def log_message(self, fmt, *args):
        pass

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw.decode() or "null")
        except ValueError:
            return None

    def _json(self, code: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_" + uuid.uuid4().hex[:12])
        self.end_headers()
        self.wfile.write(data)

    def _sse_start(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", "req_" + uuid.uuid4().hex[:12])
        self.end_headers()

    def _sse(self, event: str | None, obj: Any) -> None:
        s = (f"event: {event}\n" if event else "") + "data: " + (obj if isinstance(obj, str) else json.dumps(obj)) + "\n\n"
        data = s.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _sse_end(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        if self.path.split("?")[0].endswith("/models"):
            return self._json(200, {"object": "list", "data": [{"id": "standin-model", "object": "model",
                                                                 "owned_by": "standin"}]})
        return self._json(404, {"error": {"type": "not_found", "message": self.path}})

    def do_POST(self):
        body = self._body() or {}
        path = self.path.split("?")[0]
        if path.endswith("/messages/count_tokens"):
            return self._json(200, {"input_tokens": 100})
        if path.endswith("/messages"):
            return self.anthropic(body)
        if path.endswith("/responses"):
            return self.openai_responses(body)
        if path.endswith("/chat/completions"):
            return self.chat(body)
        if ":streamGenerateContent" in path or ":generateContent" in path:
            return self.gemini(body, stream=":streamGenerateContent" in path)
        return self._json(404, {"error": {"type": "not_found", "message": path}})

    # ---- Anthropic Messages (Claude Code) ----
    def anthropic(self, body: dict) -> None:
        tools = _tool_names(body.get("tools"))
        done = sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant"
                   and isinstance(m.get("content"), list) for c in m["content"] if c.get("type") == "tool_use")
        self.standin.record({"path": self.path, "api": "anthropic", "step": done, "tools": tools, "body": body})
        step = self.standin.step(done) if "Bash" in tools else None
        if step is not None and step.shell:
            blocks = [{"type": "text", "text": f"Step {done + 1}: {step.shell.splitlines()[0]}"},
                      {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:20], "name": "Bash",
                       "input": {"command": step.shell, "description": f"step {done + 1}"}}]
            stop = "tool_use"
        else:
            text = (step.text if step and step.text else self.standin.final_text) if "Bash" in tools else "ok"
            fmt = (body.get("output_config") or {}).get("format") or {}
            if "Bash" not in tools and fmt.get("type") == "json_schema":
                text = json.dumps({k: "Scripted session" for k in (fmt.get("schema") or {}).get("properties") or {}})
            blocks, stop = [{"type": "text", "text": text}], "end_turn"
        usage = {"input_tokens": USAGE["input"], "output_tokens": USAGE["output"],
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        mid, model = "msg_" + uuid.uuid4().hex[:20], body.get("model", "claude-standin")
        if not body.get("stream"):
            return self._json(200, {"id": mid, "type": "message", "role": "assistant", "model": model,
                                    "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": usage})
        self._sse_start()
        self._sse("message_start", {"type": "message_start", "message": {
            "id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": dict(usage, output_tokens=1)}})
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": b["text"]}
            else:
                start = {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}
            self._sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": start})
            self._sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta})
            self._sse("content_block_stop", {"type": "content_block_stop", "index": i})
        self._sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                    "usage": {"output_tokens": USAGE["output"]}})
        self._sse("message_stop", {"type": "message_stop"})
        self._sse_end()

    # ---- OpenAI Responses (Codex) ----
    def openai_responses(self, body: dict) -> None:
        tools = _tool_names(body.get("tools"))
        items = body.get("input") if isinstance(body.get("input"), list) else []
        done = sum(1 for it in items if isinstance(it, dict)
                   and it.get("type") in ("function_call", "local_shell_call", "custom_tool_call"))
        self.standin.record({"path": self.path, "api": "responses", "step": done, "tools": tools, "body": body})
        step = self.standin.step(done) if tools else None
        name, args = _shell_call(tools, step.shell) if step is not None and step.shell else (None, None)
        if name:
            item = {"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:16],
                    "call_id": "call_" + uuid.uuid4().hex[:16], "name": name,
                    "arguments": json.dumps(args), "status": "completed"}
        else:
            text = (step.text if step and step.text else self.standin.final_text) if tools else "ok"
            item = {"type": "message", "id": "msg_" + uuid.uuid4().hex[:16], "role": "assistant",
                    "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}
        usage = {"input_tokens": USAGE["input"], "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": USAGE["output"], "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": USAGE["input"] + USAGE["output"]}
        resp = {"id": "resp_" + uuid.uuid4().hex[:20], "object": "response", "created_at": int(time.time()),
                "status": "in_progress", "model": body.get("model", "standin-model"), "output": []}
        if not body.get("stream"):
            return self._json(200, dict(resp, status="completed", output=[item], usage=usage))
        self._sse_start()
        seq = iter(range(1_000_000))

        def ev(t, **kw):
            self._sse(t, {"type": t, "sequence_number": next(seq), **kw})

        ev("response.created", response=resp)
        ev("response.output_item.added", output_index=0, item=dict(item, status="in_progress"))
        ev("response.output_item.done", output_index=0, item=item)
        ev("response.completed", response=dict(resp, status="completed", output=[item], usage=usage))
        self._sse_end()

    # ---- OpenAI Chat Completions (react) ----
    def chat(self, body: dict) -> None:
        tools = _tool_names(body.get("tools"))
        done = sum(len(m.get("tool_calls") or []) for m in body.get("messages") or [] if m.get("role") == "assistant")
        self.standin.record({"path": self.path, "api": "chat", "step": done, "tools": tools, "body": body})
        step = self.standin.step(done) if tools else None
        name = args = None
        if step is not None and step.shell:
            name, args = _shell_call(tools, step.shell)
        elif step is not None and step.tool:
            name, args = step.tool, step.args
        msg: dict[str, Any] = {"role": "assistant", "content": None}
        if name:
            msg["content"] = f"Step {done + 1}."
            msg["tool_calls"] = [{"id": "call_" + uuid.uuid4().hex[:12], "type": "function",
                                  "function": {"name": name, "arguments": json.dumps(args)}}]
        else:
            msg["content"] = (step.text if step and step.text else self.standin.final_text) if tools else "ok"
        usage = {"prompt_tokens": USAGE["input"], "completion_tokens": USAGE["output"],
                 "total_tokens": USAGE["input"] + USAGE["output"]}
        cid, model = "chatcmpl-" + uuid.uuid4().hex[:16], body.get("model", "standin-model")
        finish = "tool_calls" if name else "stop"
        if not body.get("stream"):
            return self._json(200, {"id": cid, "object": "chat.completion", "created": int(time.time()),
                                    "model": model, "usage": usage,
                                    "choices": [{"index": 0, "message": msg, "finish_reason": finish}]})
        self._sse_start()
        base = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
        delta = dict(msg)
        if name:
            delta["tool_calls"] = [dict(tc, index=0) for tc in msg["tool_calls"]]
        self._sse(None, dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}]))
        self._sse(None, dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}], usage=usage))
        self._sse(None, "[DONE]")
        self._sse_end()

    # ---- Gemini API (Gemini CLI) ----
    def gemini(self, body: dict, stream: bool) -> None:
        tools = [d.get("name") for t in body.get("tools") or [] for d in t.get("functionDeclarations") or []]
        done = sum(1 for c in body.get("contents") or [] if c.get("role") == "model"
                   for p in c.get("parts") or [] if "functionCall" in p)
        self.standin.record({"path": self.path, "api": "gemini", "step": done, "tools": tools, "body": body})
        cfg = body.get("generationConfig") or {}
        schema = cfg.get("responseJsonSchema") or cfg.get("responseSchema")
        step = self.standin.step(done) if tools else None
        name, args = _shell_call(tools, step.shell) if step is not None and step.shell else (None, None)
        if name:
            parts = [{"text": f"Step {done + 1}."}, {"functionCall": {"name": name, "args": args}}]
        elif schema:      # side requests (next-speaker check, ...) want JSON: the user speaks next
            props = (schema.get("properties") or {})
            parts = [{"text": json.dumps({k: ("user" if k == "next_speaker" else "scripted") for k in props})}]
        else:
            parts = [{"text": (step.text if step and step.text else self.standin.final_text) if tools else "ok"}]
        chunk = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
                 "usageMetadata": {"promptTokenCount": USAGE["input"], "candidatesTokenCount": USAGE["output"],
                                   "totalTokenCount": USAGE["input"] + USAGE["output"]},
                 "modelVersion": body.get("model", "gemini-standin")}
        if not stream:
            return self._json(200, chunk)
        self._sse_start()
        self._sse(None, chunk)
        self._sse_end()

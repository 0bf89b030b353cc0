"""A stand-in for the paid judge APIs alpaca-eval's annotators call (OpenAI chat completions), on
127.0.0.1, with deterministic preferences, so alpaca-eval's own pipeline and ours can be run on
the same inputs offline.

It answers both annotator kinds the alpacaeval card uses:
- the ranking function-calling annotator (`alpaca_eval_gpt4_turbo_fn`'s prompt, a
  `make_partial_leaderboard` tool call): `{"ordered_models": [{"model": "m"|"M", "rank": 1}, ...]}`;
- the weighted annotator (`weighted_alpaca_eval_gpt4_turbo`: one token `m`/`M` with logprobs).

Preference: the output containing GOOD wins; if both or neither, the longer one; equal lengths
prefer `m`. The weighted answer puts probability 0.8 on the preferred token.
"""

from __future__ import annotations

import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OUTPUTS = re.compile(r'"model(?:_identifier)?": "(m|M)",\s*"output": """(.*?)"""\s*}', re.S)


def preferred(out_m: str, out_big_m: str) -> str:
    gm, gM = "GOOD" in out_m, "GOOD" in out_big_m
    if gm != gM:
        return "m" if gm else "M"
    return "M" if len(out_big_m) > len(out_m) else "m"


class AlpacaJudge:
    def __init__(self):
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def __enter__(self) -> "AlpacaJudge":
        judge = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                text = "\n".join(str(m.get("content") or "") for m in body["messages"])
                found = dict(OUTPUTS.findall(text))
                with judge._lock:
                    judge.requests.append({"model": body.get("model"), "tools": bool(body.get("tools")),
                                           "logprobs": bool(body.get("logprobs")),
                                           "auth": self.headers.get("Authorization")})
                if set(found) != {"m", "M"}:
                    return self._send(400, {"error": {"message": "stand-in judge: no m/M outputs in the prompt"}})
                best = preferred(found["m"], found["M"])
                worst = "M" if best == "m" else "m"
                message: dict = {"role": "assistant", "content": None}
                choice: dict = {"index": 0, "finish_reason": "stop", "message": message}
                if body.get("tools"):
                    args = {"ordered_models": [{"model": best, "rank": 1}, {"model": worst, "rank": 2}]}
                    message["tool_calls"] = [{"id": "call_0", "type": "function", "function": {
                        "name": "make_partial_leaderboard", "arguments": json.dumps(args)}}]
                    choice["finish_reason"] = "tool_calls"
                else:
                    message["content"] = best
                    if body.get("logprobs"):
                        top = [{"token": best, "logprob": math.log(0.8), "bytes": None},
                               {"token": worst, "logprob": math.log(0.2), "bytes": None}]
                        choice["logprobs"] = {"content": [{"token": best, "logprob": math.log(0.8), "bytes": None,
                                                           "top_logprobs": top}]}
                self._send(200, {"id": "chatcmpl-standin", "object": "chat.completion", "created": 0,
                                 "model": body.get("model"), "choices": [choice],
                                 "usage": {"prompt_tokens": len(text.split()), "completion_tokens": 5,
                                           "total_tokens": len(text.split()) + 5}})

            def _send(self, code, payload):
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

"""A stand-in for the harness's per-run grading API (docs/ARCHITECTURE.md, "Grading API"), for
agent tests that run before the engine's real one is wired in: `POST {url}/submit
{"model_path"}` checks the path is a folder under output/ in the workspace and answers a fixed
score; `GET {url}/health`. The URL carries a per-run token prefix like the real one."""

from __future__ import annotations

import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class StandinGrading:
    def __init__(self, workspace: Path, score: float = 42.0, baseline: float = 10.0):
        self.workspace = Path(workspace)
        self.score = score
        self.baseline = baseline
        self.token = secrets.token_hex(8)
        self.submissions: list[dict] = []
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> "StandinGrading":
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == f"/{outer.token}/health":
                    return self._send(200, {"ok": True})
                self._send(404, {"error": "not found"})

            def do_POST(self):
                if self.path != f"/{outer.token}/submit":
                    return self._send(404, {"error": "not found"})
                n = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(n) or b"null")
                    rel = body["model_path"]
                except (ValueError, KeyError, TypeError):
                    return self._send(400, {"error": 'send JSON {"model_path": "output/v1"}'})
                target = (outer.workspace / rel).resolve()
                if not target.is_relative_to((outer.workspace / "output").resolve()) or not target.is_dir():
                    return self._send(400, {"error": f"{rel} is not a folder under output/"})
                sub = {"submission_id": len(outer.submissions) + 1, "model_path": rel, "score": outer.score,
                       "baseline_score": outer.baseline, "improvement": outer.score - outer.baseline}
                outer.submissions.append(sub)
                self._send(200, sub)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/{self.token}"

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

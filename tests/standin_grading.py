"""A hand-laid workspace and a small stand-in for the per-run grading API, used to develop and test
the reference agent before the engine's own (engine/workspace.py, engine/run_api.py) is wired in.

The stand-in speaks the workspace contract's HTTP API on 127.0.0.1 (token path prefix, POST /submit,
GET /time, GET /submissions, GET /health) and grades every submission with the REAL grader worker
subprocess on the dev split. It does not snapshot or hash submissions: that is the engine's job.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from autorl_tui.catalog.tasks import TaskCard, materialize

REPO = Path(__file__).resolve().parents[1]


def grade(card: TaskCard, split_path: Path, model_path: Path, scratch: Path, split: str = "dev",
          threads: int = 2, limit: int | None = None) -> dict:
    scratch.mkdir(parents=True, exist_ok=True)
    tag = f"{split}-{time.time_ns()}"
    req, res = scratch / f"{tag}.request.json", scratch / f"{tag}.result.json"
    req.write_text(json.dumps({"task": card.to_dict(), "split": split, "split_path": str(split_path),
                               "model_path": str(model_path), "protocol": card.protocol.to_dict(),
                               "scorer": card.scorer, "scorer_options": card.scorer_options,
                               "backend": "transformers", "device": "cpu", "threads": threads, "seed": 0,
                               "scratch_dir": str(scratch), "limit": limit}))
    subprocess.run([sys.executable, "-m", "autorl_tui.grading.worker", str(req), str(res)], cwd=REPO, check=True,
                   env=dict(os.environ, PYTHONPATH=str(REPO)))
    return json.loads(res.read_text())


def make_workspace(root: Path, card: TaskCard, model_dir: Path, cache: Path, budget_s: float, seed: int = 0) -> dict:
    """Lay out DESIGN §3's workspace by hand; returns the agent's environment additions."""
    for d in ("code", "output", "logs", "data", "models", ".home"):
        (root / d).mkdir(parents=True, exist_ok=True)
    shutil.copytree(model_dir, root / "models" / "tiny", dirs_exist_ok=True)
    shutil.copyfile(materialize(card, "train", cache), root / "data" / "train.jsonl")
    shutil.copyfile(card.dir / card.description_file, root / "description.md")
    start = time.time()
    (root / "run_meta.json").write_text(json.dumps({"start_time": start, "timeout_s": budget_s,
                                                    "deadline": start + budget_s, "last_submit_time": None,
                                                    "seed": seed}))
    return {"TASK": card.id, "BASE_MODEL": "tiny", "MODEL_PATH": str(root / "models" / "tiny"),
            "DATA_PATH": str(root / "data"), "OUTPUT_DIR": str(root / "output"), "WORKSPACE": str(root),
            "METRICS_FILE": str(root / "logs" / "metrics.jsonl"), "RUN_DEADLINE": str(start + budget_s),
            "HOME": str(root / ".home"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1", "PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"}


class StandinGradingServer:
    def __init__(self, workspace: Path, card: TaskCard, dev_path: Path, scratch: Path, deadline: float,
                 baseline_score: float | None = None, threads: int = 2, limit: int | None = None):
        self.workspace, self.card, self.dev_path, self.scratch = workspace, card, dev_path, scratch
        self.deadline, self.baseline, self.threads, self.limit = deadline, baseline_score, threads, limit
        self.token = secrets.token_hex(8)
        self.submissions: list[dict] = []
        self.started = time.time()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code: int, body: dict):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                prefix = f"/{server.token}"
                if not self.path.startswith(prefix + "/"):
                    return self._send(404, {"error": "not found"})
                route = self.path[len(prefix):]
                if route == "/time":
                    return self._send(200, {"remaining_s": max(0.0, server.deadline - time.time()),
                                            "deadline": server.deadline})
                if route == "/health":
                    return self._send(200, {"ok": True})
                if route == "/submissions":
                    return self._send(200, {"submissions": [{k: v for k, v in s.items() if k != "result"}
                                                            for s in server.submissions]})
                return self._send(404, {"error": f"unknown endpoint {route}"})

            def do_POST(self):
                if self.path != f"/{server.token}/submit":
                    return self._send(404, {"error": "not found"})
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                    rel = body["model_path"]
                except (ValueError, KeyError, TypeError):
                    return self._send(400, {"error": 'send JSON {"model_path": "output/v1"}'})
                path = (server.workspace / rel).resolve()
                if not path.is_relative_to((server.workspace / "output").resolve()):
                    return self._send(400, {"error": f"{rel} is outside output/"})
                if time.time() > server.deadline:
                    return self._send(409, {"error": "the budget is over"})
                with server._lock:
                    received = time.time()
                    result = grade(server.card, server.dev_path, path, server.scratch, threads=server.threads,
                                   limit=server.limit)
                    if not result["ok"]:
                        return self._send(422, {"error": result["error"], "error_kind": result["error_kind"]})
                    sub = {"submission_id": len(server.submissions) + 1, "model_path": rel, "score": result["score"],
                           "received": received, "result": result}
                    server.submissions.append(sub)
                    best = max(server.submissions, key=lambda s: s["score"])
                    return self._send(200, {
                        "submission_id": sub["submission_id"], "score": sub["score"],
                        "baseline_score": server.baseline,
                        "improvement": None if server.baseline is None else sub["score"] - server.baseline,
                        "best": {"submission_id": best["submission_id"], "score": best["score"]},
                        "total_submissions": len(server.submissions),
                        "elapsed_seconds": round(received - server.started, 1)})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/{self.token}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

"""The agent's tools: shell, write_file, read_file, submit. Each returns (text for the model,
the action to emit). Shell commands run in their own process group so that a timeout or the
deadline kills everything they started."""

from __future__ import annotations

import difflib
import json
import os
import signal
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

MODEL_OUTPUT_LIMIT = 8_000      # characters of a tool result the model sees (head + tail)

TOOL_SCHEMAS = [
    {"type": "function", "function": {
        "name": "shell",
        "description": "Run a bash command in the workspace and get its exit code and output "
                       "(stdout and stderr together; long output is cut in the middle).",
        "parameters": {"type": "object", "properties": {
            "command": {"type": "string", "description": "the bash command"},
            "timeout_s": {"type": "number", "description": "kill it after this many seconds (default 600)"}},
            "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "write_file",
        "description": "Create or overwrite a text file (parent folders are created).",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string", "description": "path, relative to the workspace"},
            "content": {"type": "string"}}, "required": ["path", "content"]}}},
    {"type": "function", "function": {
        "name": "read_file",
        "description": "Read a text file (up to max_chars characters from offset).",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}, "offset": {"type": "integer"},
            "max_chars": {"type": "integer"}}, "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "submit",
        "description": "Submit a checkpoint folder under output/ for grading; returns its dev score.",
        "parameters": {"type": "object", "properties": {
            "model_path": {"type": "string", "description": "e.g. output/v1"}},
            "required": ["model_path"]}}},
]


def head_tail(text: str, limit: int = MODEL_OUTPUT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters cut ...]\n{text[-half:]}"


class Tools:
    def __init__(self, workspace: Path, clock, default_timeout_s: float = 600.0):
        self.workspace = workspace
        self.clock = clock
        self.default_timeout_s = default_timeout_s
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def kill_running(self) -> None:
        """Kill the running shell command's whole process group (deadline watchdog)."""
        with self._lock:
            proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def run(self, name: str, args: dict) -> tuple[str, dict]:
        method = getattr(self, f"tool_{name}", None)
        if method is None:
            text = f"unknown tool {name!r}; tools: shell, write_file, read_file, submit"
            return text, {"kind": "tool_result", "name": name, "output": text, "is_error": True}
        try:
            return method(**args)
        except TypeError as exc:
            text = f"bad arguments for {name}: {exc}"
            return text, {"kind": "tool_result", "name": name, "output": text, "is_error": True}

    def tool_shell(self, command: str, timeout_s: float | None = None) -> tuple[str, dict]:
        timeout = self.clock.bound(float(timeout_s or self.default_timeout_s))
        proc = subprocess.Popen(["bash", "-c", command], cwd=self.workspace, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        with self._lock:
            self._proc = proc
        timed_out = False
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            self.kill_running()
            out, _ = proc.communicate()
        finally:
            with self._lock:
                self._proc = None
        output = out.decode("utf-8", "replace")
        code = None if timed_out else proc.returncode
        note = f"[killed after {timeout:.0f} s]" if timed_out else f"[exit code {code}]"
        text = f"{note}\n{head_tail(output)}"
        return text, {"kind": "shell", "command": command, "exit_code": code, "output": output,
                      "extra": {"timed_out": True} if timed_out else None}

    def _path(self, path: str) -> Path:
        p = Path(path)
        return p if p.is_absolute() else self.workspace / p

    def tool_write_file(self, path: str, content: str) -> tuple[str, dict]:
        target = self._path(path)
        old = target.read_text(errors="replace") if target.is_file() else None
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        diff = None
        if old is not None:
            diff = "".join(difflib.unified_diff(old.splitlines(True), content.splitlines(True),
                                                f"a/{path}", f"b/{path}", n=2))
        summary = f"wrote {len(content)} chars" + (" (new file)" if old is None else "")
        return f"{summary} to {path}", {"kind": "file_edit", "path": path, "diff": diff, "summary": summary}

    def tool_read_file(self, path: str, offset: int = 0, max_chars: int = MODEL_OUTPUT_LIMIT) -> tuple[str, dict]:
        try:
            text = self._path(path).read_text(errors="replace")
        except OSError as exc:
            msg = f"cannot read {path}: {exc.strerror or exc}"
            return msg, {"kind": "tool_result", "name": "read_file", "output": msg, "is_error": True}
        chunk = text[offset: offset + max(1, min(int(max_chars), 50_000))]
        rest = len(text) - offset - len(chunk)
        shown = chunk + (f"\n[... {rest} more characters; read again with offset]" if rest > 0 else "")
        return shown, {"kind": "tool_result", "name": "read_file", "output": f"{path}: {len(chunk)} chars",
                       "is_error": False}

    def tool_submit(self, model_path: str) -> tuple[str, dict]:
        base = os.environ.get("GRADING_SERVER_URL", "").rstrip("/")
        if not base:
            msg = "GRADING_SERVER_URL is not set: cannot submit"
            return msg, {"kind": "tool_result", "name": "submit", "output": msg, "is_error": True}
        req = urllib.request.Request(f"{base}/submit", data=json.dumps({"model_path": model_path}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.clock.bound(3600)) as resp:
                body, is_error = resp.read().decode("utf-8", "replace"), False
        except urllib.error.HTTPError as exc:
            body, is_error = f"HTTP {exc.code}: " + exc.read().decode("utf-8", "replace"), True
        except (urllib.error.URLError, OSError) as exc:
            body, is_error = f"submission failed: {getattr(exc, 'reason', exc)}", True
        return body, {"kind": "tool_result", "name": "submit", "output": body, "is_error": is_error,
                      "input": {"model_path": model_path}}

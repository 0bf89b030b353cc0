"""Run one agent command under the real local executor (shim, bwrap, leased uid, the sandbox's own
network) and collect what it printed: the network and device isolation tests' driver."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from autorl_tui.executors.base import LaunchSpec, SandboxLaunch
from autorl_tui.executors.local import LocalExecutor

# What an agent runs to probe a list of addresses: one JSON line {"target": "ok" | "error ..."}.
PROBE = r"""
import json, socket, sys, urllib.request
out = {}
for target in sys.argv[1:]:
    try:
        if target.startswith("http://"):
            out[target] = "ok " + urllib.request.urlopen(target, timeout=5).read().decode()[:80]
        elif target.startswith("@"):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(5)
            s.connect("\0" + target[1:]); out[target] = "ok " + s.recv(64).decode(); s.close()
        else:
            host, port = target.rsplit(":", 1)
            s = socket.create_connection((host, int(port)), timeout=5); out[target] = "ok"; s.close()
    except Exception as exc:
        out[target] = f"error {type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


def run_local_agent(root: Path, argv: list[str], *, network: str = "none", env: dict | None = None,
                    host_ports: list[int] = (), gpus: list[str] = (), timeout: float = 60) -> tuple[dict, str, str]:
    """(exit.json, stdout, stderr) of argv run as a sandboxed local agent in a workspace under root
    (root must be reachable by other uids: tests.support.harness.make_reachable_home)."""
    ws = root / "ws"
    for d in ("code", "output", "logs", "data", "models"):
        (ws / d).mkdir(parents=True, exist_ok=True)
    log_dir = root / "logs"
    spec = LaunchSpec(run_id="net-test", attempt=1, command=list(argv), workspace=ws,
                      env={"PATH": "/usr/bin:/bin", "HOME": str(ws), "LANG": "C.UTF-8", **(env or {})},
                      log_dir=log_dir, deadline=time.time() + timeout, network=network, gpus=list(gpus),
                      writable=("code", "output", "logs"), sandbox=SandboxLaunch(host_ports=list(host_ports)))

    async def go():
        handle = await LocalExecutor().start(spec)
        await asyncio.wait_for(handle.wait(), timeout + 30)
        return handle

    handle = asyncio.run(go())
    return (json.loads((log_dir / "exit.json").read_text()), handle.stdout_path.read_text(),
            handle.stderr_path.read_text())


def probe(root: Path, targets: list[str], **kw) -> dict:
    """What an agent reaches of `targets` (host:port, http://..., @abstract-socket)."""
    script = root / "ws" / "code" / "probe.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(PROBE)
    info, out, err = run_local_agent(root, ["/usr/bin/python3", str(script), *targets], **kw)
    assert info["exit_code"] == 0, (info, out, err)
    return json.loads(out.strip().splitlines()[-1])


class HttpServer:
    """A real HTTP server answering `body` on (host, port 0), in a thread."""

    def __init__(self, host: str = "127.0.0.1", body: str = "hello"):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://{host}:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class AbstractSocketServer:
    """A listening abstract unix socket of the host that greets whoever connects."""

    def __init__(self, name: str):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind("\0" + name)
        self.sock.listen(8)
        self.name = name

        def serve():
            while True:
                try:
                    conn, _ = self.sock.accept()
                except OSError:
                    return
                conn.sendall(b"host-secret")
                conn.close()
        threading.Thread(target=serve, daemon=True).start()

    def close(self):
        self.sock.close()

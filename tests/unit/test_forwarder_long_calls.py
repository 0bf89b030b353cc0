"""The forwarders from an agent's sandbox or container to the engine's TCP grading API
(isolation/sandbox_net.py `upstream_to_tcp`: the local sandbox's network and the Ray node's
docker shim) carry a call as long as the engine takes to answer it (a synchronous `/submit`
waits for its dev grading), and still end a call whose peer died without closing."""

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autorl_tui.isolation import sandbox_net

ROOT = Path(__file__).resolve().parents[2]
REQUEST = b"POST /tok/submit HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"


def slow_upstream(hold_s: float) -> tuple[socket.socket, int]:
    """An HTTP upstream that answers each request only after `hold_s` (a long dev grading)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(4096)
            time.sleep(hold_s)             # the grading being slow is what is tested
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\n{\"ok\":1}\n")
    threading.Thread(target=serve, daemon=True).start()
    return listener, listener.getsockname()[1]


def test_a_call_outlasting_the_connect_timeout_and_keepalive_probes_is_carried(tmp_path, monkeypatch):
    # The limits made short, the call made longer than all of them: before, the connect timeout
    # stayed on the upstream socket and cut every call that lasted longer (30 s on the nodes).
    monkeypatch.setattr(sandbox_net, "CONNECT_TIMEOUT_S", 0.3)
    monkeypatch.setattr(sandbox_net, "KEEPALIVE_IDLE_S", 1)
    monkeypatch.setattr(sandbox_net, "KEEPALIVE_INTERVAL_S", 1)
    monkeypatch.setattr(sandbox_net, "KEEPALIVE_PROBES", 1)
    hold = 4.0
    listener, port = slow_upstream(hold)
    server = sandbox_net.upstream_to_tcp(tmp_path / "api.sock", "127.0.0.1", port, "the slow upstream")
    try:
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(tmp_path / "api.sock"))
            t0 = time.monotonic()
            client.sendall(REQUEST)
            client.settimeout(60)
            answer = b""
            while chunk := client.recv(4096):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200 OK") and answer.endswith(b'{"ok":1}\n'), answer
        assert time.monotonic() - t0 >= hold
    finally:
        server.close()
        listener.close()


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("iptables"),
                    reason="needs root, unshare and iptables (a private network namespace whose firewall drops the peer)")
@pytest.mark.subprocess
@pytest.mark.parametrize("mode", ["idle", "in_flight"])
def test_a_peer_that_dies_without_closing_ends_the_call_within_the_keepalive_limit(tmp_path, mode):
    out = subprocess.run(["unshare", "--net", sys.executable, "-m", "tests.support.silent_peer", str(tmp_path), mode],
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    # idle 1 s + 2 probes 1 s apart (or the request unacknowledged for as long): the kernel gives
    # up after ~3 s and the client's call ends, unanswered, instead of hanging until its own 60 s
    assert result["received"] == "", result
    assert result["ended_after_s"] < 30, result

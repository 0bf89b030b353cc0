"""A forwarded call whose upstream peer goes silent (every packet it sends dropped, as when its
host dies or the link is cut: no FIN, no RST). Run as root in a network namespace of its own
(`unshare --net`), so the firewall rule touches nothing else:

    unshare --net python -m tests.support.silent_peer SOCKET_DIR idle|in_flight

MODE `idle`: the peer goes silent once it has the request (keepalive finds it); `in_flight`: before
the request reaches it (the request is never acknowledged: TCP_USER_TIMEOUT finds it).
Prints one JSON line: how long the client's call lasted before the forwarder ended it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from autorl_tui.isolation import sandbox_net


def drop_from(port: int) -> None:
    subprocess.run(["iptables", "-w", "-I", "INPUT", "-p", "tcp", "--sport", str(port), "-j", "DROP"], check=True)


def main(folder: str, mode: str) -> int:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    sandbox_net.KEEPALIVE_IDLE_S, sandbox_net.KEEPALIVE_INTERVAL_S, sandbox_net.KEEPALIVE_PROBES = 1, 1, 2
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    accepted, got_request = threading.Event(), threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        conn, _ = listener.accept()
        held.append(conn)                    # never answers, never closes
        accepted.set()
        request = b""
        while b"\r\n\r\n" not in request:
            request += conn.recv(4096)
        got_request.set()
    threading.Thread(target=serve, daemon=True).start()
    server = sandbox_net.upstream_to_tcp(Path(folder) / "api.sock", "127.0.0.1", port, "the silent peer")
    client = socket.socket(socket.AF_UNIX)
    client.connect(str(Path(folder) / "api.sock"))      # the forwarder connects upstream now
    if not accepted.wait(10):
        print(json.dumps({"error": "the upstream never saw the connection"}))
        return 1
    if mode == "in_flight":
        drop_from(port)         # the peer's host "dies" before the request reaches it
    client.sendall(b"POST /tok/submit HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    if mode == "idle":
        if not got_request.wait(10):
            print(json.dumps({"error": "the upstream never got the request"}))
            return 1
        drop_from(port)         # it "dies" once it has the request: nothing it sends arrives
    t0 = time.monotonic()
    client.settimeout(60)
    try:
        data = client.recv(1024)
    except OSError as exc:
        data = repr(exc).encode()
    print(json.dumps({"ended_after_s": round(time.monotonic() - t0, 2), "received": data.decode(errors="replace")}))
    server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))

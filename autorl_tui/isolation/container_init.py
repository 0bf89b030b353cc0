"""The entry program of an agent container (stdlib only: it runs with the container's python3).

    python3 container_init.py [--deadline EPOCH [--deadline-file PATH]]
                              [--listen 127.0.0.1:PORT --socket /run/autorl-grading/api.sock]
                              [--forward 127.0.0.1:PORT=/path/to.sock ...]
                              -- AGENT ARGV...

1. If `--listen` is given, binds a TCP listener on the container's own loopback and forwards
   every connection to the grading API's Unix socket (bind-mounted from the harness), so that
   `GRADING_SERVER_URL=http://127.0.0.1:PORT/<token>` works with plain HTTP even under
   `--network none`. The listener is bound before the agent starts. `--forward` does the same for
   any number of ports (the local sandbox's own network namespace: isolation/sandbox_net.py).
2. Runs the agent as its child and exits with its exit code.
3. With `--deadline`, enforces the deadline itself: at the deadline (re-read from `--deadline-file` when it exists,
   so the harness can extend it) it kills every process of the container and exits 137. This is the
   safety net for a harness that died: the container can never outlive its budget.

It runs under Docker's init (tini), so when it exits the container ends and every process in it
(including ones that called setsid) is killed.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time

DEADLINE_EXIT = 137


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                s.shutdown(how)
            except OSError:
                pass


def _unix_upstream(socket_path: str):
    def connect() -> socket.socket:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(socket_path)
        except OSError:
            upstream.close()
            raise
        return upstream
    connect.what = f"grading API socket {socket_path}"
    return connect


def _serve_connection(client: socket.socket, connect) -> None:
    try:
        upstream = connect()
    except OSError as exc:
        sys.stderr.write(f"autorl: {getattr(connect, 'what', 'upstream')} unreachable: {exc}\n")
        client.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def serve(server: socket.socket, connect) -> None:
    """Forward every connection accepted on `server` (listening) to a new `connect()` socket,
    in daemon threads. Also used on cluster nodes (executors/docker_shim.py), the other way round:
    a Unix socket for the container, the engine's TCP grading API upstream."""
    def accept_loop() -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=_serve_connection, args=(client, connect), daemon=True).start()

    threading.Thread(target=accept_loop, daemon=True).start()


def start_forwarder(listen: str, socket_path: str) -> socket.socket:
    host, _, port = listen.rpartition(":")
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host or "127.0.0.1", int(port)))
    server.listen(64)
    serve(server, _unix_upstream(socket_path))
    return server


def current_deadline(deadline: float, deadline_file: str | None) -> float:
    if deadline_file:
        try:
            with open(deadline_file) as f:
                return float(f.read().strip())
        except (OSError, ValueError):
            pass
    return deadline


def in_container_pid_namespace() -> bool:
    """True only right under Docker's init in a fresh PID namespace, where "every process but us
    and init" means the container's processes and nothing of the host."""
    if os.getppid() != 1:
        return False
    try:
        with open("/proc/1/cmdline", "rb") as f:
            init = f.read().split(b"\0")[0]
    except OSError:
        return False
    return os.path.basename(init) in (b"docker-init", b"tini", b"tini-static")


def kill_everything(child: subprocess.Popen, whole_container: bool) -> None:
    if whole_container and in_container_pid_namespace():
        # the agent's group and whatever escaped it with setsid
        me = os.getpid()
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) not in (me, 1):
                try:
                    os.kill(int(name), signal.SIGKILL)
                except OSError:
                    pass
    else:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        child.kill()
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="container_init")
    parser.add_argument("--deadline", type=float)
    parser.add_argument("--deadline-file")
    parser.add_argument("--listen")
    parser.add_argument("--socket")
    parser.add_argument("--forward", action="append", default=[], metavar="HOST:PORT=SOCKET")
    parser.add_argument("--container", action="store_true",
                        help="at the deadline kill every process of the container (checked: PID 1 is Docker's init)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no agent command after --")
    if args.listen and args.socket:
        start_forwarder(args.listen, args.socket)
    for spec in args.forward:
        listen, _, path = spec.partition("=")
        start_forwarder(listen, path)

    # its own process group, so that outside a container the guard can still kill the whole group
    child = subprocess.Popen(command, start_new_session=not args.container)

    def forward(signum, _frame):
        try:
            child.send_signal(signum)
        except OSError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)

    while True:
        try:
            return child.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
        if args.deadline is not None and time.time() >= current_deadline(args.deadline, args.deadline_file):
            sys.stderr.write("autorl: deadline reached, killing the agent\n")
            sys.stderr.flush()
            kill_everything(child, args.container)
            return DEADLINE_EXIT


if __name__ == "__main__":
    code = main()
    sys.exit(code if code >= 0 else 128 - code)

"""The local sandbox's network (`network: none | bridge | host` of an agent spec), set up by the
local shim around bubblewrap (docs/security.md, "Network"):

- `none` and `bridge`: the sandbox has its own network namespace (bwrap `--unshare-net`), whose
  loopback is its own: the host's loopback services, other runs' APIs, a Ray head and every
  abstract unix socket of the host are not there. The run's grading API and the host ports the
  plan names (`host_ports`, and a loopback `driver_url`) are the only ways out to the host: for
  each, the shim listens on a Unix socket (in a folder only the sandbox's uid may enter, bound
  into the sandbox at /run/autorl-net) and forwards its connections to the host's TCP port;
  inside, `container_init.py` listens on 127.0.0.1:<the same port> and forwards to that socket,
  so an agent's URLs stay what they are on the host.
- `bridge` adds egress through slirp4netns (its Debian package), a user-mode network stack that
  runs on the host as the uid and gid EGRESS_ID (holding only the capabilities that join the
  sandbox's namespace): its outbound sockets are the agent's connections. Its gateway does not
  lead to the host's loopback (`--disable-host-loopback`), nothing is forwarded into the sandbox,
  and a firewall rule (iptables and ip6tables, OUTPUT, installed once per host, idempotent)
  rejects every connection of that group to an address of the host itself (loopback or not).
- `host`: the host's network, as the harness has it. Only when the agent spec says so; the run
  spec records it and reports mark it.
"""

from __future__ import annotations

import os
import select
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from autorl_tui.isolation import container_init
from autorl_tui.isolation.container_init import serve

MODES = ("none", "bridge", "host")
NET_DIR = "/run/autorl-net"                 # inside the sandbox: the forwarders' sockets and init
NET_BASE = Path("/run/autorl-tui/net")      # on the host: <uid>/ holds them while the sandbox lives
EGRESS_ID = 1_499_999_999                   # slirp4netns's uid and gid: the firewall rule matches it
SLIRP = "slirp4netns"
SETPRIV = "/usr/bin/setpriv"
INIT_SOURCE = Path(container_init.__file__)
READY_TIMEOUT_S = 10.0
FIREWALL_RULE = ["OUTPUT", "-m", "owner", "--gid-owner", str(EGRESS_ID), "-m", "addrtype", "--dst-type", "LOCAL",
                 "-j", "REJECT"]


class NetworkSetupError(OSError):
    """The sandbox's network could not be set up as the agent spec asks."""


# The forwarders to a TCP upstream carry a call as long as the upstream takes to answer it (a
# synchronous `/submit` waits for its dev grading: minutes for a large model), so no read timeout;
# only the connect has a limit. A peer that dies without closing (its host gone, a cut link) is
# found by TCP: keepalive probes while the call is idle, and the same limit on data it never
# acknowledges (TCP_USER_TIMEOUT): the forwarded connection ends within IDLE + INTERVAL * PROBES s.
CONNECT_TIMEOUT_S = 30.0
KEEPALIVE_IDLE_S = 30
KEEPALIVE_INTERVAL_S = 10
KEEPALIVE_PROBES = 6


def tcp_upstream(host: str, port: int) -> socket.socket:
    """A connection to host:port for a forwarder: connect within CONNECT_TIMEOUT_S, then blocking
    for as long as the call lasts, with keepalive probes that end it if the peer is gone."""
    sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    sock.settimeout(None)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_IDLE_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, KEEPALIVE_INTERVAL_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPALIVE_PROBES)
    dead_after_ms = 1000 * (KEEPALIVE_IDLE_S + KEEPALIVE_INTERVAL_S * KEEPALIVE_PROBES)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, dead_after_ms)
    return sock


def upstream_to_tcp(path: Path, host: str, port: int, what: str, owner: int | None = None) -> socket.socket:
    """A listening Unix socket at `path` whose connections go to host:port over TCP (daemon threads).
    `owner`: the only uid that may connect (the socket is 0600, given to it); None: anyone (0666)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    if owner is None:
        os.chmod(path, 0o666)
    else:
        os.chown(path, owner, owner)
        os.chmod(path, 0o600)
    server.listen(64)

    def upstream() -> socket.socket:
        return tcp_upstream(host, port)
    upstream.what = what
    serve(server, upstream)
    return server


def grading_port(env: dict[str, str]) -> tuple[str, int] | None:
    url = env.get("GRADING_SERVER_URL")
    if not url:
        return None
    parts = urlsplit(url)
    if not parts.hostname or not parts.port:
        raise NetworkSetupError(f"the run's grading URL {url!r} names no HOST:PORT")
    return parts.hostname, parts.port


@dataclass
class SandboxNetwork:
    """One sandbox's network: what bwrap adds, the command prefix inside, and the host side."""
    mode: str
    uid: int
    forwards: list[tuple[int, str, int]] = field(default_factory=list)   # inside port, host, host port
    folder: Path | None = None
    servers: list[socket.socket] = field(default_factory=list)
    egress: subprocess.Popen | None = None
    _exit_w: int | None = None

    @classmethod
    def plan(cls, mode: str, uid: int, env: dict[str, str], host_ports: list[int]) -> "SandboxNetwork":
        if mode not in MODES:
            raise NetworkSetupError(f"network {mode!r} is not one of {', '.join(MODES)}")
        net = cls(mode=mode, uid=uid)
        if mode == "host":
            return net
        api = grading_port(env)
        if api is not None:
            net.forwards.append((api[1], api[0], api[1]))
        for port in host_ports:
            if all(port != f[0] for f in net.forwards):
                net.forwards.append((int(port), "127.0.0.1", int(port)))
        return net

    @property
    def isolated(self) -> bool:
        return self.mode != "host"

    def agent_env(self, env: dict[str, str]) -> dict[str, str]:
        """The agent's environment: its grading URL points at its own loopback (same port)."""
        if not self.isolated or not env.get("GRADING_SERVER_URL"):
            return env
        parts = urlsplit(env["GRADING_SERVER_URL"])
        local = urlunsplit((parts.scheme or "http", f"127.0.0.1:{parts.port}", parts.path, parts.query, ""))
        return dict(env, GRADING_SERVER_URL=local)

    def open(self) -> None:
        """The host side: the folder of sockets (the sandbox uid's alone) and their forwarders."""
        if not self.isolated:
            return
        if self.mode == "bridge":
            ensure_firewall()
            if shutil.which(SLIRP) is None:
                raise NetworkSetupError("network `bridge` under the local executor needs slirp4netns "
                                        "(Debian/Ubuntu: apt-get install slirp4netns; or scripts/system-deps.sh)")
        # One folder per leased uid: a shim killed outright leaves its folder, the uid's next sandbox clears it.
        NET_BASE.mkdir(parents=True, exist_ok=True, mode=0o711)
        self.folder = NET_BASE / str(self.uid)
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(mode=0o700)
        shutil.copyfile(INIT_SOURCE, self.folder / "init.py")
        os.chmod(self.folder / "init.py", 0o444)
        for inside, host, port in self.forwards:
            self.servers.append(upstream_to_tcp(self.folder / f"{inside}.sock", host, port,
                                                f"host port {host}:{port}", owner=self.uid))
        os.chown(self.folder, self.uid, self.uid)
        os.chmod(self.folder, 0o500)

    def bwrap_args(self) -> list[str]:
        if not self.isolated:
            return []
        return ["--ro-bind", str(self.folder), NET_DIR]

    def command(self, python: str, argv: list[str]) -> list[str]:
        """The agent's argv inside the sandbox: behind the loopback forwarders when there are any."""
        if not self.isolated or not self.forwards:
            return argv
        cmd = [python, "-I", "-S", f"{NET_DIR}/init.py"]
        for inside, _, _ in self.forwards:
            cmd += ["--forward", f"127.0.0.1:{inside}={NET_DIR}/{inside}.sock"]
        return cmd + ["--", *argv]

    def attach(self, sandbox_pid: int) -> None:
        """`bridge`: slirp4netns into the sandbox's network namespace, as EGRESS_ID with only the
        capabilities it needs to join it; returns once the namespace has its route out. It ends
        when the shim does (its exit fd closes)."""
        if self.mode != "bridge":
            return
        _wait_loopback_up(sandbox_pid)
        ready_r, ready_w = os.pipe()
        exit_r, self._exit_w = os.pipe()
        caps = "+sys_admin,+net_admin,+sys_ptrace"   # join the namespace (ptrace: open /proc/PID/ns/net)
        argv = [SETPRIV, f"--reuid={EGRESS_ID}", f"--regid={EGRESS_ID}", "--clear-groups", f"--inh-caps={caps}",
                f"--ambient-caps={caps}", shutil.which(SLIRP) or SLIRP, "--configure", "--mtu=65520",
                "--disable-host-loopback", f"--ready-fd={ready_w}", f"--exit-fd={exit_r}", str(sandbox_pid), "tap0"]
        try:
            self.egress = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.PIPE, pass_fds=(ready_w, exit_r), start_new_session=True)
        finally:
            os.close(ready_w)
            os.close(exit_r)
        try:
            ready, _, _ = select.select([ready_r], [], [], READY_TIMEOUT_S)
            if not ready or os.read(ready_r, 1) != b"1":
                self.egress.kill()
                err = self.egress.communicate()[1].decode(errors="replace").strip().splitlines()
                raise NetworkSetupError(f"slirp4netns did not set up the sandbox's network within {READY_TIMEOUT_S:.0f} s"
                                        f" (exit {self.egress.returncode}): {' '.join(err[-2:])}")
        finally:
            os.close(ready_r)

    def close(self) -> None:
        for server in self.servers:
            server.close()
        self.servers.clear()
        if self._exit_w is not None:
            os.close(self._exit_w)         # slirp4netns's exit fd
            self._exit_w = None
        if self.egress is not None and self.egress.poll() is None:
            self.egress.kill()
            self.egress.wait()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def _wait_loopback_up(pid: int) -> None:
    """Until bwrap has set up the namespace's loopback (address, then link up): slirp4netns
    configuring the namespace at the same time makes bwrap's own netlink requests fail."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    argv = ["nsenter", f"--net=/proc/{pid}/ns/net", "ip", "-o", "link", "show", "lo"]
    while True:
        out = subprocess.run(argv, capture_output=True, text=True).stdout
        flags = out.split("<", 1)[-1].split(">", 1)[0].split(",") if "<" in out else []
        if "UP" in flags:
            return
        if time.monotonic() > deadline:
            raise NetworkSetupError(f"the sandbox's loopback did not come up within {READY_TIMEOUT_S:.0f} s")
        time.sleep(0.005)


_FIREWALL_DONE: set[str] = set()


def ensure_firewall() -> None:
    """The host's rule that keeps slirp4netns's connections off the host's own addresses (idempotent)."""
    for tool in ("iptables", "ip6tables"):
        if tool in _FIREWALL_DONE:
            continue
        exe = shutil.which(tool)
        if exe is None:
            raise NetworkSetupError(f"network `bridge` needs {tool} to keep agents off the host's own addresses "
                                    "(Debian/Ubuntu: apt-get install iptables)")
        check = subprocess.run([exe, "-w", "-C", *FIREWALL_RULE], capture_output=True)
        if check.returncode != 0:
            add = subprocess.run([exe, "-w", "-I", *FIREWALL_RULE], capture_output=True, text=True)
            if add.returncode != 0:
                raise NetworkSetupError(f"could not install the firewall rule for network `bridge` ({tool}): "
                                        f"{add.stderr.strip()}")
        _FIREWALL_DONE.add(tool)

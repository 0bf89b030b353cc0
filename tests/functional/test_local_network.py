"""The local sandbox's own network namespace (executors/sandbox_net.py), attacked for real: a
sandboxed local agent (real shim, bwrap, leased uid) tries the host's loopback services, a Ray
head with token authentication off, an abstract unix socket of the host and the host's own
addresses; it still reaches its grading API and the host ports the plan names, and under
`network: bridge` (slirp4netns) a server on another machine's address (a network namespace and
veth pair this test creates)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support.harness import make_reachable_home
from tests.support.local_agent import AbstractSocketServer, HttpServer, probe

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("bwrap") is None,
                                reason="the local sandbox needs root and bubblewrap")


@pytest.fixture
def root():
    r = make_reachable_home("autorl-net-")
    r.mkdir()
    yield r
    shutil.rmtree(r.parent, ignore_errors=True)


def host_address() -> str | None:
    """A non-loopback IPv4 address of this host (the one its default route leaves from)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.123", 9))     # no packet is sent: only the route is looked up
            return s.getsockname()[0]
        except OSError:
            return None


def reached(result: str) -> bool:
    return result.startswith("ok")


def test_none_reaches_only_its_grading_api_and_the_named_host_ports(root):
    api, allowed, other = HttpServer(body="api"), HttpServer(body="allowed"), HttpServer(body="other")
    on_all = HttpServer(host="0.0.0.0", body="host-wide")
    abstract = AbstractSocketServer(f"autorl-test-{uuid.uuid4().hex[:8]}")
    addr = host_address()
    targets = [api.url + "/token/health", allowed.url, other.url, f"@{abstract.name}",
               f"127.0.0.1:{on_all.port}"] + ([f"http://{addr}:{on_all.port}"] if addr else [])
    try:
        # Every target is there for the host itself (and for an agent with the host's network).
        seen_by_host = probe(root, targets, network="host", env={"GRADING_SERVER_URL": api.url + "/token"})
        assert all(reached(v) for v in seen_by_host.values()), seen_by_host
        got = probe(root, targets, network="none", env={"GRADING_SERVER_URL": api.url + "/token"},
                    host_ports=[allowed.port])
    finally:
        for s in (api, allowed, other, on_all, abstract):
            s.close()
    assert got[api.url + "/token/health"] == "ok api"             # the run's API, same URL as on the host
    assert got[allowed.url] == "ok allowed"                        # a port the plan names
    blocked = {k: v for k, v in got.items() if k not in (api.url + "/token/health", allowed.url)}
    assert blocked and not any(reached(v) for v in blocked.values()), got


def test_a_ray_head_without_token_auth_on_the_host_is_unreachable(root, tmp_path):
    ray = Path(sys.executable).with_name("ray")
    if not ray.exists():
        pytest.skip("ray is not installed")
    temp = Path("/tmp") / f"ray-{uuid.uuid4().hex[:6]}"      # Ray's socket paths must stay short
    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    gcs, client = ports
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    start = subprocess.run([str(ray), "start", "--head", f"--port={gcs}", f"--ray-client-server-port={client}",
                            f"--temp-dir={temp}", "--num-cpus=1", "--include-dashboard=false", "--disable-usage-stats"],
                           env=env, capture_output=True, text=True, timeout=180)
    try:
        assert start.returncode == 0, start.stdout + start.stderr
        addr = host_address() or "127.0.0.1"
        targets = [f"127.0.0.1:{gcs}", f"127.0.0.1:{client}", f"{addr}:{gcs}", f"{addr}:{client}"]
        deadline = time.time() + 60
        while True:     # the client server comes up after `ray start` returns
            try:
                socket.create_connection((addr, client), timeout=2).close()
                break
            except OSError:
                assert time.time() < deadline, "the Ray Client port never opened"
                time.sleep(0.2)
        for network in ("none", "bridge"):
            got = probe(root, targets, network=network)
            assert not any(reached(v) for v in got.values()), (network, got)
    finally:
        subprocess.run([str(ray), "stop", "--force"], env=dict(env, RAY_TMPDIR=str(temp)),
                       capture_output=True, timeout=120)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture
def remote_server():
    """An HTTP server on 10.213.<n>.2 in a network namespace of its own, reached from the host
    through a veth pair whose host end has no address (only a route): another machine, as far as
    the host's addresses go."""
    if shutil.which("ip") is None:
        pytest.skip("iproute2 is not installed")
    tag = uuid.uuid4().hex[:6]
    ns, host_if, ns_if = f"autorl-remote-{tag}", f"arh{tag}", f"arn{tag}"
    address = f"10.213.{int(tag[:2], 16)}.2"
    def ip(*args, check=True):
        return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)
    server = None
    try:
        ip("netns", "add", ns)
        ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        ip("link", "set", ns_if, "netns", ns)
        ip("link", "set", host_if, "up")
        ip("route", "add", f"{address}/32", "dev", host_if)
        ip("-n", ns, "addr", "add", f"{address}/32", "dev", ns_if)
        ip("-n", ns, "link", "set", ns_if, "up")
        ip("-n", ns, "link", "set", "lo", "up")
        ip("-n", ns, "route", "add", "default", "dev", ns_if)
        server = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m", "http.server", "-b", address,
                                   "18080"], cwd=Path(__file__).parent, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection((address, 18080), timeout=1).close()
                break
            except OSError:
                assert time.time() < deadline and server.poll() is None, "the remote server did not start"
                time.sleep(0.1)
        yield f"http://{address}:18080/{Path(__file__).name}"
    finally:
        if server is not None:
            server.kill()
            server.wait()
        ip("link", "del", host_if, check=False)
        ip("netns", "del", ns, check=False)


def test_bridge_reaches_another_machine_but_not_the_host(root, remote_server):
    on_all = HttpServer(host="0.0.0.0", body="host-wide")
    addr = host_address()
    host_targets = [f"127.0.0.1:{on_all.port}", f"10.0.2.2:{on_all.port}"] + ([f"{addr}:{on_all.port}"] if addr else [])
    try:
        got = probe(root, [remote_server, *host_targets], network="bridge")
        none = probe(root, [remote_server], network="none")
    finally:
        on_all.close()
    assert got[remote_server].startswith("ok"), got                    # egress works
    assert not any(reached(got[t]) for t in host_targets), got         # the host does not
    assert not reached(none[remote_server]), none                      # `none` has no way out

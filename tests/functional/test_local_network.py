"""The local sandbox's own network namespace (isolation/sandbox_net.py), attacked for real: a
sandboxed local agent (real shim, bwrap, leased uid) tries the host's loopback services, a Ray
head with token authentication off, an abstract unix socket of the host and the host's own
addresses; it still reaches its grading API and the host ports the plan names, and under
`network: bridge` (slirp4netns) a server on another machine's address (a network namespace and
veth pair this test creates)."""

from __future__ import annotations

import json
import os
import stat
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from autorl_tui.executors.ray_auth import token_auth_enforced
from tests.support.harness import make_reachable_home
from tests.support.local_agent import AbstractSocketServer, HttpServer, probe, run_local_agent

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


def test_a_ray_head_without_token_auth_on_the_host_is_unreachable(root):
    pytest.importorskip("ray")
    from tests.support.ray_head import RayHead

    head = RayHead(token=None)
    try:
        addr = host_address() or "127.0.0.1"
        head.wait_for_port(addr, head.client)      # the Ray Client server comes up after `ray start` returns
        assert token_auth_enforced(head.address) is False          # the breach's cluster: anyone may submit
        targets = [f"127.0.0.1:{head.gcs}", f"{addr}:{head.gcs}", f"{addr}:{head.client}"]
        for network in ("none", "bridge"):
            got = probe(root, targets, network=network)
            assert not any(reached(v) for v in got.values()), (network, got)
    finally:
        head.stop()


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


@pytest.fixture
def standin_gpus(root, monkeypatch):
    """Stand-in NVIDIA device nodes (real character devices, made with mknod) for a 4-GPU host."""
    dev = root / "dev"
    dev.mkdir()
    for name, minor in [(f"nvidia{i}", i) for i in range(4)] + [("nvidiactl", 255), ("nvidia-modeset", 254)]:
        os.mknod(dev / name, 0o666 | stat.S_IFCHR, os.makedev(195, minor))
    for name, minor in (("nvidia-uvm", 0), ("nvidia-uvm-tools", 1)):
        os.mknod(dev / name, 0o666 | stat.S_IFCHR, os.makedev(508, minor))
    monkeypatch.setenv("AUTORL_DEVICE_ROOT", str(dev))
    return dev


CONTROL = {"nvidiactl", "nvidia-modeset", "nvidia-uvm", "nvidia-uvm-tools"}
LIST_DEV = "import os, json; print(json.dumps([sorted(n for n in os.listdir('/dev') if n.startswith('nvidia')), os.environ.get('CUDA_VISIBLE_DEVICES')]))"


def test_a_local_agent_sees_only_its_own_gpu_nodes(root, standin_gpus):
    info, out, err = run_local_agent(root, ["/usr/bin/python3", "-c", LIST_DEV], gpus=["3", "1"],
                                     env={"CUDA_VISIBLE_DEVICES": "3,1"})
    assert info["exit_code"] == 0, (info, err)
    nodes, visible = json.loads(out.strip().splitlines()[-1])
    assert set(nodes) == CONTROL | {"nvidia1", "nvidia3"}, nodes
    assert visible == "1,0"                   # CUDA numbers the two devices it can open 0 (nvidia1), 1 (nvidia3)
    info, out, err = run_local_agent(root, ["/usr/bin/python3", "-c", LIST_DEV])
    assert json.loads(out.strip().splitlines()[-1])[0] == []          # no GPU: no node at all


def test_the_grader_sandbox_binds_only_its_gpu(root, standin_gpus):
    from autorl_tui.isolation.sandbox_bwrap import Sandbox, UidLease

    with UidLease.acquire() as lease:
        argv = Sandbox(uid=lease.uid, chdir=Path("/"), gpus=["2"]).argv(["/usr/bin/python3", "-c", LIST_DEV])
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert set(json.loads(proc.stdout)[0]) == CONTROL | {"nvidia2"}


USERNS = ("unshare -U true; echo userns=$?; "
          "/usr/bin/python3 -c \"import subprocess, threading; t = threading.Thread(target=print); t.start(); t.join(); "
          "print('spawn', subprocess.run(['true']).returncode)\"")


def test_user_namespaces_are_closed_inside_the_local_sandbox(root):
    from autorl_tui.isolation.sandbox_bwrap import Sandbox, UidLease

    with UidLease.acquire() as lease:       # the same sandbox without the filter: user namespaces are open
        argv = Sandbox(uid=lease.uid, chdir=Path("/")).argv(["/bin/sh", "-c", USERNS])
        bare = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert "userns=0" in bare.stdout, bare.stdout + bare.stderr
    info, out, err = run_local_agent(root, ["/bin/sh", "-c", USERNS])
    assert "userns=1" in out and "Operation not permitted" in err, (out, err)
    assert "spawn 0" in out, (out, err)          # threads and processes still work (clone3 falls back to clone)

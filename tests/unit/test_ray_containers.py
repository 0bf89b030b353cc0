"""Containers on Ray nodes (executors/docker_shim.py) without a cluster: the spec the node's docker
executor gets (Ray's GPU ids pinned as the container's devices, the API through the node's socket),
the node's forwarder to the engine's grading API, and the engine saying once that the cluster is
unreachable."""

import asyncio
import http.server
import socket
import threading

import pytest

from autorl_tui.executors.base import ClusterLaunch, ContainerLaunch, LaunchSpec, Mount, SandboxLaunch
from autorl_tui.executors.docker import FORWARD_PORT, GRADING_TARGET, build_container_config
from autorl_tui.executors.docker_shim import _api_forwarder, container_launch, node_spec


def _spec(tmp_path, **kw) -> LaunchSpec:
    ws = tmp_path / "ws"
    (ws / "models").mkdir(parents=True, exist_ok=True)
    return LaunchSpec(run_id="r1", attempt=2, command=["python", "agent.py"], workspace=ws,
                      env={"GRADING_SERVER_URL": "http://10.0.0.5:41234/tok", "CUDA_VISIBLE_DEVICES": ""},
                      log_dir=tmp_path / "logs", deadline=1234.5, mounts=[Mount(ws / "models", "models/tiny")],
                      writable=("output",), sandbox=SandboxLaunch(private_paths=[tmp_path / "secret"]),
                      container=ContainerLaunch(image=None, grading_socket=tmp_path / "engine.sock"),
                      cluster=ClusterLaunch(placement={"gpus": 2, "containers": True}), **kw)


def test_the_spec_crosses_to_the_node_intact(tmp_path):
    spec = _spec(tmp_path, cpus=1.5, memory_bytes=2 ** 30, network="bridge")
    launch = container_launch(spec, tmp_path / "home")
    assert LaunchSpec.from_dict(launch["container"]) == spec
    assert launch["deadline"] == spec.deadline and launch["log_dir"] == str(spec.log_dir)


def test_rays_gpus_are_the_containers_devices_and_the_api_is_the_nodes_socket(tmp_path):
    spec = _spec(tmp_path)
    node_sock = tmp_path / "node-api" / "grading.sock"
    on_node = node_spec(container_launch(spec, tmp_path), ["1", "3"], node_sock)
    assert on_node.gpus == ["1", "3"] and on_node.container.grading_socket == node_sock
    assert on_node.cluster.placement == {}
    config = build_container_config(on_node, image="img", runtime_mounts=[], python="python3", home="h", user=None)
    [request] = config["device_requests"]
    assert request["DeviceIDs"] == ["1", "3"]                      # exactly Ray's assignment
    assert config["environment"]["CUDA_VISIBLE_DEVICES"] == "0,1"  # renumbered inside the container
    assert config["environment"]["GRADING_SERVER_URL"] == f"http://127.0.0.1:{FORWARD_PORT}/tok"
    binds = {m["Target"]: m["Source"] for m in config["mounts"]}
    assert binds[GRADING_TARGET] == str(node_sock.parent)
    no_gpu = build_container_config(node_spec(container_launch(spec, tmp_path), [], node_sock), image="img",
                                    runtime_mounts=[], python="python3", home="h", user=None)
    assert "device_requests" not in no_gpu and no_gpu["environment"]["CUDA_VISIBLE_DEVICES"] == ""


class _Api(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"seen {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_nodes_socket_forwards_to_the_engines_api():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    path, listener = _api_forwarder(f"http://127.0.0.1:{server.server_address[1]}/tok")
    try:
        assert oct(path.stat().st_mode & 0o777) == oct(0o666) and oct(path.parent.stat().st_mode & 0o777) == oct(0o711)
        for i in range(3):      # one upstream connection per client connection
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.settimeout(30)
                client.connect(str(path))
                client.sendall(f"GET /tok/health{i} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
                answer = b""
                while chunk := client.recv(4096):
                    answer += chunk
            assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(f"seen /tok/health{i}".encode())
    finally:
        listener.close()
        server.shutdown()


def test_a_grading_url_without_a_port_is_refused():
    from autorl_tui.executors.base import ExecutorError

    with pytest.raises(ExecutorError, match="names no HOST:PORT"):
        _api_forwarder("http:///tok")


def test_an_unreachable_cluster_is_said_once_per_change(tmp_path, capsys):
    from autorl_tui.engine.engine import Engine
    from autorl_tui.home import Home

    async def go():
        engine = Engine(Home.open(str(tmp_path / "home")))
        await engine.start()
        try:
            for error in ["connection refused", "connection refused", "timeout", None, None, "refused again"]:
                engine._cluster_reachability(error)
            engine.store.flush()
            return [e["message"] for e in engine.store.query("SELECT message FROM events WHERE run_id IS NULL "
                                                             "AND message LIKE '%Ray cluster%' ORDER BY id")]
        finally:
            await engine.stop()

    messages = asyncio.run(go())
    assert messages == ["cannot reach the Ray cluster: connection refused; its queued runs wait",
                        "the Ray cluster is reachable again",
                        "cannot reach the Ray cluster: refused again; its queued runs wait"]
    assert capsys.readouterr().err.count("cannot reach the Ray cluster") == 2

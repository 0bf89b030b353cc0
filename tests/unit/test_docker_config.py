"""The container configuration built from a LaunchSpec (pure; the real runs are in
tests/functional/test_docker_executor.py)."""


import pytest

pytest.importorskip("docker")

from autorl_tui.executors.base import ContainerLaunch, ExecutorError, LaunchSpec, Mount  # noqa: E402
from autorl_tui.executors.docker import FORWARD_PORT, build_container_config  # noqa: E402
from autorl_tui.executors.images import host_runtime_mounts, runtime_image_tag  # noqa: E402


def spec(tmp_path, **kw):
    (tmp_path / "ws").mkdir(exist_ok=True)
    (tmp_path / "model").mkdir(exist_ok=True)
    base = dict(run_id="r1", attempt=2, command="echo hi", workspace=tmp_path / "ws",
                env={"CUDA_VISIBLE_DEVICES": "3,5", "GRADING_SERVER_URL": "http://127.0.0.1:40001/tok"},
                log_dir=tmp_path / "logs", deadline=1e10, mounts=[Mount(tmp_path / "model", "models/m")])
    base.update(kw)
    return LaunchSpec(**base)


def config(s, **kw):
    return build_container_config(s, image="img", runtime_mounts=[], python="python3", home="/h", user="65534:65534", **kw)


def test_gpus_by_explicit_ids_renumbered_inside(tmp_path):
    c = config(spec(tmp_path, gpus=["3", "5"]))
    (req,) = c["device_requests"]
    assert req["DeviceIDs"] == ["3", "5"] and req["Capabilities"] == [["gpu"]] and not req.get("Count")
    assert c["environment"]["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert "device_requests" not in config(spec(tmp_path))
    assert config(spec(tmp_path))["environment"]["CUDA_VISIBLE_DEVICES"] == ""


def test_mounts_labels_and_grading_url(tmp_path):
    sock = tmp_path / "g" / "api.sock"
    c = config(spec(tmp_path, container=ContainerLaunch(grading_socket=sock)))
    mounts = {m["Target"]: m for m in c["mounts"]}
    ws = str((tmp_path / "ws").resolve())
    assert mounts[ws]["ReadOnly"] is False
    assert mounts[ws + "/models/m"]["ReadOnly"] is True
    assert mounts["/run/autorl-grading"]["Source"] == str(tmp_path / "g")
    assert c["environment"]["GRADING_SERVER_URL"] == f"http://127.0.0.1:{FORWARD_PORT}/tok"
    assert c["labels"] == {"autorl.run_id": "r1", "autorl.home": "/h", "autorl.attempt": "2", "autorl.executor": "docker"}
    assert c["command"][-3:] == ["/bin/sh", "-c", "echo hi"] and "--listen" in c["command"]
    # host networking: the loopback URL works as is, no forwarder, no socket mount
    h = config(spec(tmp_path, container=ContainerLaunch(grading_socket=sock), network="host"))
    assert h["environment"]["GRADING_SERVER_URL"] == "http://127.0.0.1:40001/tok" and "--listen" not in h["command"]


def test_limits_and_bad_input(tmp_path):
    c = config(spec(tmp_path, cpus=1.5, memory_bytes=1 << 30))
    assert c["nano_cpus"] == 1_500_000_000 and c["mem_limit"] == c["memswap_limit"] == 1 << 30
    assert c["cap_drop"] == ["ALL"] and c["network_mode"] == "none"
    with pytest.raises(ExecutorError, match="network"):
        config(spec(tmp_path, network="overlay"))
    with pytest.raises(ExecutorError, match="does not exist"):
        config(spec(tmp_path, mounts=[Mount(tmp_path / "nope", "data")]))


def test_runtime_mounts_are_the_agent_runtime_not_the_harness_and_tag_is_stable(tmp_path):
    import os
    import sys

    from autorl_tui.executors.agent_runtime import find
    from autorl_tui.executors.images import hidden_tmpfs

    # a stand-in agent runtime: a virtualenv of this interpreter's installation (no packages needed)
    import venv

    venv.create(tmp_path / "agent-venv", with_pip=False, symlinks=True)
    rt = find(tmp_path / "agent-venv")
    mounts = host_runtime_mounts(rt)
    targets = [m.target for m in mounts]
    assert all(m.read_only for m in mounts)
    assert "/usr" in targets and "/etc" in targets
    assert str(rt.root) in targets
    base = os.path.realpath(sys.base_prefix)
    assert any(base == t or base.startswith(t + "/") for t in targets)
    # the harness's own environment is not mounted (unless it lies under /usr, the system)
    assert not any(sys.prefix == t or sys.prefix.startswith(t + "/") for t in targets if t != "/usr")
    assert not any(t in ("/", "/home", "/root", "/tmp") for t in targets)
    # the base installation's own site-packages shows empty
    assert all(p.endswith("-packages") for p in hidden_tmpfs(rt))
    assert runtime_image_tag() == runtime_image_tag() and runtime_image_tag().startswith("autorl-tui/runtime:")


def test_docker_log_timestamps_parse_to_nanoseconds():
    from autorl_tui.executors.docker_logs import parse_ts_ns

    base = parse_ts_ns("2026-11-22T01:30:00Z")
    assert base == 1795311000 * 10**9
    assert parse_ts_ns(b"2026-11-22T01:30:00.5Z") - base == 500_000_000      # trailing zeros trimmed
    assert parse_ts_ns("2026-11-22T01:30:00.000000001Z") - base == 1
    assert parse_ts_ns("2026-11-22T01:30:00.123456789Z") < parse_ts_ns("2026-11-22T01:30:00.2Z")

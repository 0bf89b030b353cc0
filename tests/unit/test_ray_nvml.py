"""Ray nodes with GPUs need NVML: without nvidia-ml-py a node's gradings would not see its GPUs
and run on the CPU without a word, so plan validation refuses such a node with the fix. The nodes
are stand-in data (`ray.nodes()` entries); the NVML probe itself runs for real on this machine
(which has no NVIDIA driver) over stand-in device nodes."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from autorl_tui.executors.ray import RayExecutor
from autorl_tui.executors.ray_node import nvml_probe, nvml_verdict
from autorl_tui.exitcodes import UsageError

NODES = {"gpu-node-1": {"NodeManagerHostname": "gpu1", "Resources": {"CPU": 16.0, "GPU": 8.0}},
         "cpu-node-2": {"NodeManagerHostname": "cpu2", "Resources": {"CPU": 8.0}}}


class ProbedHere(RayExecutor):
    """Runs the pinned per-node task in this process (what each node would answer, with this
    machine's own NVML), recording which nodes were asked."""

    def __init__(self, answers: dict[str, tuple[bool, str]]):
        super().__init__()
        self.answers, self.asked = answers, []

    def _on_each_node(self, node_ids, fn, *args, what):
        self.asked += node_ids
        return [{"node_id": nid, "hostname": NODES[nid]["NodeManagerHostname"], "ok": self.answers[nid][0],
                 "why": self.answers[nid][1]} for nid in node_ids]


def test_the_probe_refuses_a_node_with_nvidia_devices_it_cannot_read(tmp_path, monkeypatch):
    """This machine has no NVIDIA driver, so the real NVML cannot be read; with stand-in device
    nodes (AUTORL_DEVICE_ROOT) it is a GPU node that cannot see its GPUs."""
    monkeypatch.setenv("AUTORL_DEVICE_ROOT", str(tmp_path))
    ok, why = nvml_probe()
    if ok and not why:
        pytest.skip("this machine reads NVIDIA GPUs through NVML")
    assert ok and "declared stand-ins" in why           # no device node: a test cluster's declared GPUs
    (tmp_path / "nvidiactl").touch()
    assert nvml_probe()[0]                              # a control node is not a GPU
    (tmp_path / "nvidia0").touch()
    ok, why = nvml_probe()
    assert not ok and why.startswith(("NVML unavailable", "nvidia-ml-py is not installed"))


def test_a_gpu_node_without_nvml_is_refused_with_the_fix():
    ex = ProbedHere({"gpu-node-1": (False, "nvidia-ml-py is not installed")})
    with pytest.raises(UsageError) as err:
        ex.check_nvml(NODES)
    message = str(err.value)
    assert ex.asked == ["gpu-node-1"]                   # a CPU-only node is not asked
    assert "gpu1 (gpu-node-1)" in message and "run on the CPU" in message and "autorl-tui[ray]" in message
    assert "\n" not in message


def test_gpu_nodes_with_nvml_pass_and_are_checked_once():
    ex = ProbedHere({"gpu-node-1": (True, "")})
    ex.check_nvml(NODES)
    ex.check_nvml(NODES)
    assert ex.asked == ["gpu-node-1"]
    assert nvml_verdict([{"node_id": "n", "hostname": "h", "ok": True, "why": ""}]) is None


def test_the_ray_extra_brings_nvml():
    extras = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())[
        "project"]["optional-dependencies"]
    assert any(req.startswith("nvidia-ml-py") for req in extras["ray"])

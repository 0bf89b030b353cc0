"""Device ids a user can trust, read from stand-in NVML data (tests/support/nvml_standin.py; NVML
cannot run without an NVIDIA driver): the engine's own CUDA_VISIBLE_DEVICES narrows discovery,
children get CUDA_DEVICE_ORDER=PCI_BUS_ID, Docker device requests carry UUIDs, MIG instances are
listed (or their GPU left out with the reason)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autorl_tui.executors.gpus import Nvml, device_uuids, discover, inventory
from autorl_tui.engine.scheduling import QueuedRun, plan_starts
from autorl_tui.exitcodes import UsageError
from tests.support.nvml_standin import Card, StandInNvml, eight_gpus


def found(env: dict, nv: StandInNvml | None = None):
    return discover(Nvml(nv or eight_gpus()), env=env)


def test_without_cuda_visible_devices_every_gpu_is_the_engines():
    assert found({}).ids == [str(i) for i in range(8)]


def test_an_engine_given_gpus_4_to_7_schedules_runs_on_4_to_7_only():
    inv = found({"CUDA_VISIBLE_DEVICES": "4,5,6,7"})
    assert inv.ids == ["4", "5", "6", "7"] and inv.source == "nvml"
    queue = [QueuedRun(f"r{i}", gpus=1, queue_pos=i) for i in range(6)]
    starts = plan_starts(queue, inv.ids, now=0.0, inventory=inv.ids)
    assert sorted(g for _, ids in starts for g in ids) == ["4", "5", "6", "7"]
    assert len(starts) == 4                 # two runs wait: 0-3 are not the engine's


def test_uuids_and_unique_prefixes_name_gpus_in_the_order_given():
    nv = eight_gpus()
    u6, u2 = nv.cards[6].uuid, nv.cards[2].uuid
    inv = found({"CUDA_VISIBLE_DEVICES": f"{u6},{u2[:14]}"}, nv)
    assert inv.ids == ["6", "2"] and inv.gpus[0].uuid == u6


def test_a_negative_index_ends_the_list_and_an_empty_one_hides_every_gpu():
    assert found({"CUDA_VISIBLE_DEVICES": "3,-1,5"}).ids == ["3"]
    inv = found({"CUDA_VISIBLE_DEVICES": ""})
    assert inv.ids == [] and "CUDA_VISIBLE_DEVICES" in inv.note


@pytest.mark.parametrize("value, what", [("9", "no GPU of this machine"), ("GPU-0000", "more than one GPU"),
                                         ("GPU-ffff", "no GPU of this machine")])
def test_a_cuda_visible_devices_naming_no_gpu_here_is_refused_clearly(value, what):
    with pytest.raises(UsageError) as err:
        found({"CUDA_VISIBLE_DEVICES": f"4,{value}"})
    message = str(err.value)
    assert f"CUDA_VISIBLE_DEVICES='4,{value}'" in message and what in message and "unset it" in message
    assert "\n" not in message


def test_mig_instances_are_listed_in_place_of_their_gpu():
    a = Card("MIG-aaaa-1111", name="NVIDIA A100 MIG 3g.40gb", memory=40 << 30)
    b = Card("MIG-bbbb-2222", memory=40 << 30)
    nv = StandInNvml([Card("GPU-0"), Card("GPU-1", mig=[a, b]), Card("GPU-2", mig_capable=True)])
    inv = discover(Nvml(nv), env={})
    assert inv.ids == ["0", "MIG-aaaa-1111", "MIG-bbbb-2222", "2"]
    assert inv.gpus[1].parent == "1" and inv.gpus[1].memory_total == 40 << 30 and inv.gpus[0].parent is None
    # the engine's CUDA_VISIBLE_DEVICES may name the GPU (all its instances) or one instance
    assert discover(Nvml(nv), env={"CUDA_VISIBLE_DEVICES": "1"}).ids == ["MIG-aaaa-1111", "MIG-bbbb-2222"]
    assert discover(Nvml(nv), env={"CUDA_VISIBLE_DEVICES": "MIG-bbbb"}).ids == ["MIG-bbbb-2222"]


def test_a_gpu_in_mig_mode_without_instances_is_left_out_with_the_fix():
    nv = StandInNvml([Card("GPU-0"), Card("GPU-1", mig=[])])
    inv = discover(Nvml(nv), env={})
    assert inv.ids == ["0"] and "GPU 1 is in MIG mode without MIG instances" in inv.note and "-mig 0" in inv.note
    only = discover(Nvml(StandInNvml([Card("GPU-1", mig=[])])), env={})
    assert only.ids == [] and "MIG mode" in only.note


def test_declared_ids_are_still_checked_and_win_over_discovery():
    nv = Nvml(eight_gpus())
    assert inventory(["7"], nvml=nv).ids == ["7"]
    with pytest.raises(UsageError):
        inventory(["8"], nvml=nv)


def test_docker_device_requests_carry_uuids():
    from autorl_tui.executors.base import LaunchSpec
    from autorl_tui.executors.docker import build_container_config

    nv = eight_gpus()
    uuids = device_uuids(["3", "5"], Nvml(nv))
    assert uuids == [nv.cards[3].uuid, nv.cards[5].uuid] and nv.shutdowns == 1     # NVML closed again
    assert device_uuids(["MIG-x", nv.cards[1].uuid], Nvml(nv)) == ["MIG-x", nv.cards[1].uuid]
    spec = LaunchSpec(run_id="r1", attempt=1, command="true", workspace=Path("/w"), env={}, log_dir=Path("/l"),
                      deadline=1e10, gpus=["3", "5"])
    config = build_container_config(spec, image="img", runtime_mounts=[], python="python3", home="/h", user=None,
                                    device_ids=uuids)
    [request] = config["device_requests"]
    assert request["DeviceIDs"] == uuids
    assert config["environment"]["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_without_nvml_ids_are_kept_as_given():
    class Broken(Nvml):
        def devices(self):
            raise ImportError("no pynvml")

    assert device_uuids(["0", "1"], Broken()) == ["0", "1"]


def test_children_get_pci_bus_order(tmp_path):
    from autorl_tui.grading_host.grading_client import _grader_env
    from autorl_tui.engine.workspace import Workspace, agent_environment

    ws = Workspace(root=tmp_path, model_name="tiny")
    env = agent_environment(ws, task_id="arith", grading_url="http://x", deadline=1.0, seed=0, gpus=["4"],
                            passthrough={}, python_bin_dir="/usr/bin")
    assert env["CUDA_VISIBLE_DEVICES"] == "4" and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    genv = _grader_env({}, ["4"], 1)
    assert genv["CUDA_VISIBLE_DEVICES"] == "4" and genv["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_the_local_sandbox_refuses_mig_instances_clearly_and_docker_takes_them():
    from autorl_tui.executors.docker import DockerExecutor
    from autorl_tui.executors.local import LocalExecutor

    why = LocalExecutor().check_host("sandbox", ["0", "MIG-aaaa-1111"])
    assert "MIG-aaaa-1111" in why and "executor: docker" in why and "\n" not in why
    assert LocalExecutor().check_host("none", ["MIG-aaaa-1111"]) is None        # unisolated: CUDA sees it
    assert "MIG" not in (DockerExecutor(client=_NoDocker()).check_host("sandbox", ["MIG-aaaa-1111"]) or "")


class _NoDocker:
    def version(self):
        raise RuntimeError("no daemon in this test")

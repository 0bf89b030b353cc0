"""GPU inventory. This machine has no NVIDIA driver: the real pynvml must report "no GPU" with a
reason; the NVML seam itself is exercised with a stand-in of the pynvml API (NVML cannot run here)."""

from types import SimpleNamespace

import pytest

from autorl_tui.executors.gpus import Nvml, discover, inventory, sample_utilization
from autorl_tui.exitcodes import UsageError


class FakePynvml:
    """The subset of pynvml the seam uses, for two devices."""

    def __init__(self):
        self.shutdown = False

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        self.shutdown = True

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return int(uuid[-1])

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-0000-{h}".encode()

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H100"

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(total=80 << 30, used=(h + 1) << 30)

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=40 + h)


def test_real_nvml_on_a_machine_without_driver_reports_none_with_reason():
    inv = discover()
    if inv.source == "nvml":
        pytest.skip("this machine has NVIDIA GPUs")
    assert inv.ids == [] and inv.note
    assert sample_utilization(["0"]) == []


def test_nvml_seam_lists_devices_and_samples():
    nv = Nvml(FakePynvml())
    inv = discover(nv)
    assert inv.source == "nvml" and inv.ids == ["0", "1"]
    assert inv.gpus[1].uuid == "GPU-0000-1" and inv.gpus[1].name == "NVIDIA H100"
    samples = sample_utilization(["1", "GPU-0000-0"], nv)
    assert [(s.id, s.utilization, s.memory_used) for s in samples] == [("1", 41.0, 2 << 30), ("GPU-0000-0", 40.0, 1 << 30)]
    nv.close()


def test_declared_ids_are_checked_against_nvml_when_present():
    nv = Nvml(FakePynvml())
    assert inventory("1", nv).gpus[0].uuid == "GPU-0000-1"
    with pytest.raises(UsageError, match="not present"):
        inventory("0,5", nv)

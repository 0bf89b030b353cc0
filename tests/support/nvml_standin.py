"""A stand-in of the pynvml API (NVML cannot run on a machine without an NVIDIA driver) describing
a given box: whole GPUs and GPUs in MIG mode with their instances. Only what executors/gpus.py calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace


class NVMLError(Exception):
    pass


@dataclass
class Card:
    uuid: str
    name: str = "NVIDIA H100 80GB HBM3"
    memory: int = 80 << 30
    used: int = 1 << 30
    mig: list["Card"] | None = None      # None: MIG not supported; []: MIG mode on, no instance
    mig_capable: bool = False
    slots: int = 7                       # nvmlDeviceGetMaxMigDeviceCount


@dataclass
class StandInNvml:
    cards: list[Card] = field(default_factory=list)
    NVML_DEVICE_MIG_ENABLE = 1
    inits: int = 0
    shutdowns: int = 0

    def nvmlInit(self):
        self.inits += 1

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlDeviceGetCount(self):
        return len(self.cards)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.cards[i]

    def nvmlDeviceGetHandleByUUID(self, uuid):
        for c in self.cards + [m for c in self.cards for m in (c.mig or [])]:
            if c.uuid == uuid:
                return c
        raise NVMLError("Not Found")

    def nvmlDeviceGetUUID(self, h):
        return h.uuid.encode()

    def nvmlDeviceGetName(self, h):
        return h.name.encode()

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(total=h.memory, used=h.used)

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=50)

    def nvmlDeviceGetMigMode(self, h):
        if h.mig is None and not h.mig_capable:
            raise NVMLError("Not Supported")
        return (1 if h.mig is not None else 0, 0)

    def nvmlDeviceGetMaxMigDeviceCount(self, h):
        return h.slots

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h, i):
        if h.mig is None or i >= len(h.mig):
            raise NVMLError("Not Found")
        return h.mig[i]


def eight_gpus() -> StandInNvml:
    return StandInNvml([Card(f"GPU-{i:08x}-aaaa-bbbb-cccc-{i:012x}") for i in range(8)])

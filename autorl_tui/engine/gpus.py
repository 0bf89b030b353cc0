"""GPU inventory: which devices this machine offers to runs.

Three sources, in order of precedence:
- declared: `--gpus 0,1,2` or the config's `gpus:` (ids only; nothing is probed, so a fake
  inventory works without CUDA);
- discovered through NVML (`nvidia-ml-py`, imported as `pynvml`): index, UUID, name, memory;
- none: no GPU, runs get CPU slots.

Device ids are strings (`"0"`, `"1"`, or a UUID): they are what `CUDA_VISIBLE_DEVICES` and a
Docker device request take. Who holds which device is not recorded here: the engine derives it
from live attempts every time it schedules.

NVML is reached only through the `Nvml` seam below, so the rest of the harness never imports
`pynvml` and a machine without the driver simply reports no GPUs (with the reason).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from autorl_tui.exitcodes import UsageError


@dataclass(frozen=True)
class Gpu:
    id: str                          # device id for CUDA_VISIBLE_DEVICES / Docker device_ids
    uuid: str | None = None
    name: str | None = None
    memory_total: int | None = None  # bytes

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class GpuInventory:
    gpus: tuple[Gpu, ...] = ()
    source: str = "none"             # declared | nvml | none
    note: str = ""                   # why there are no GPUs, when there are none

    @property
    def ids(self) -> list[str]:
        return [g.id for g in self.gpus]

    def __len__(self) -> int:
        return len(self.gpus)

    def to_dict(self) -> dict:
        return {"source": self.source, "note": self.note, "gpus": [g.to_dict() for g in self.gpus]}


@dataclass
class GpuSample:
    id: str
    utilization: float | None        # percent, 0-100
    memory_used: int | None          # bytes
    memory_total: int | None         # bytes
    extra: dict[str, Any] = field(default_factory=dict)


_ID = re.compile(r"^(\d+|GPU-[0-9A-Za-z-]+|MIG-[0-9A-Za-z/-]+)$")


def parse_gpu_ids(value: str | Iterable[str | int] | None) -> list[str]:
    """`"0,1,2"`, `[0, 1]`, `"none"` or `""` -> a list of device ids. Raises UsageError on junk."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("", "none", "cpu"):
            return []
        items = [p.strip() for p in text.split(",")]
    else:
        items = [str(v).strip() for v in value]
    ids: list[str] = []
    for item in items:
        if not _ID.match(item):
            raise UsageError(
                f"GPU id {item!r} is not valid: give indices like 0,1,2 or UUIDs like GPU-8f3c...; "
                "use 'none' for a machine without GPUs")
        if item in ids:
            raise UsageError(f"GPU id {item!r} is listed twice in {value!r}")
        ids.append(item)
    return ids


class Nvml:
    """The one place that talks to NVML. `module` is `pynvml` (or a stand-in with its API)."""

    def __init__(self, module: Any = None):
        self._module = module
        self._initialized = False

    def _nvml(self):
        if self._module is None:
            import pynvml  # provided by nvidia-ml-py (optional extra `gpu`)

            self._module = pynvml
        if not self._initialized:
            self._module.nvmlInit()
            self._initialized = True
        return self._module

    def devices(self) -> list[Gpu]:
        nv = self._nvml()
        out = []
        for index in range(nv.nvmlDeviceGetCount()):
            handle = nv.nvmlDeviceGetHandleByIndex(index)
            mem = nv.nvmlDeviceGetMemoryInfo(handle)
            out.append(Gpu(id=str(index), uuid=_text(nv.nvmlDeviceGetUUID(handle)),
                           name=_text(nv.nvmlDeviceGetName(handle)), memory_total=int(mem.total)))
        return out

    def sample(self, ids: Iterable[str]) -> list[GpuSample]:
        nv = self._nvml()
        out = []
        for gid in ids:
            if not gid.isdigit():
                handle = nv.nvmlDeviceGetHandleByUUID(gid)
            else:
                handle = nv.nvmlDeviceGetHandleByIndex(int(gid))
            util = nv.nvmlDeviceGetUtilizationRates(handle)
            mem = nv.nvmlDeviceGetMemoryInfo(handle)
            out.append(GpuSample(id=gid, utilization=float(util.gpu), memory_used=int(mem.used),
                                 memory_total=int(mem.total)))
        return out

    def close(self) -> None:
        if self._initialized and self._module is not None:
            try:
                self._module.nvmlShutdown()
            finally:
                self._initialized = False


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def discover(nvml: Nvml | None = None) -> GpuInventory:
    """Probe NVML. Never raises: a machine without the library or driver has no GPUs (see `note`)."""
    nvml = nvml or Nvml()
    try:
        gpus = nvml.devices()
    except ImportError:
        return GpuInventory((), "none", "nvidia-ml-py is not installed (pip install 'autorl-tui[gpu]')")
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return GpuInventory((), "none", f"NVML unavailable: {exc}")
    if not gpus:
        return GpuInventory((), "none", "NVML reports no GPU")
    return GpuInventory(tuple(gpus), "nvml")


def inventory(declared: str | Iterable[str | int] | None = None, nvml: Nvml | None = None) -> GpuInventory:
    """The inventory the scheduler uses. `declared` (CLI/config) wins over discovery; an explicit
    `"none"` or empty list means CPU slots only. With NVML present, declared ids are checked against
    what NVML sees so a typo does not schedule runs on a device that does not exist."""
    if declared is None:
        return discover(nvml)
    ids = parse_gpu_ids(declared)
    if not ids:
        return GpuInventory((), "none", "declared: no GPUs")
    if nvml is not None:
        found = {g.id: g for g in nvml.devices()}
        found.update({g.uuid: g for g in found.copy().values() if g.uuid})
        missing = [i for i in ids if i not in found]
        if missing:
            raise UsageError(f"declared GPU ids {missing} are not present (NVML sees {sorted(found)})")
        return GpuInventory(tuple(Gpu(id=i, uuid=found[i].uuid, name=found[i].name,
                                      memory_total=found[i].memory_total) for i in ids), "declared")
    return GpuInventory(tuple(Gpu(id=i) for i in ids), "declared")


def sample_utilization(ids: Iterable[str], nvml: Nvml | None = None) -> list[GpuSample]:
    """Utilization and memory of the given devices (resources instrumentation). Empty list when
    NVML is unavailable (declared fake ids on a machine without GPUs)."""
    ids = list(ids)
    if not ids:
        return []
    try:
        return (nvml or Nvml()).sample(ids)
    except Exception:
        return []

"""GPU inventory: which devices this machine offers to runs.

Three sources, in order of precedence:
- declared: `--gpus 0,1,2` or the config's `gpus:` (ids only; nothing is probed, so a fake
  inventory works without CUDA);
- discovered through NVML (`nvidia-ml-py`, imported as `pynvml`): index, UUID, name, memory;
- none: no GPU, runs get CPU slots.

Device ids are strings (`"0"`, `"1"`, a `GPU-` UUID, or a `MIG-` UUID): what `CUDA_VISIBLE_DEVICES`
takes. Indices are NVML's (nvidia-smi's), which number GPUs in PCI bus order; CUDA's own default
order is "fastest first", so every child the engine starts gets `CUDA_DEVICE_ORDER=PCI_BUS_ID`
(`PCI_BUS_ORDER`) and an index means the same card to both. A Docker device request gets UUIDs
(`device_uuids`): the same card whatever numbering the daemon, a node or a job uses.
Who holds which device is not recorded here: the engine derives it from live attempts every time
it schedules.

The engine's own `CUDA_VISIBLE_DEVICES` (indices in that PCI order, UUIDs or unique UUID prefixes)
narrows discovery: an operator who gives the engine GPUs 4-7 gets runs on 4-7 only. MIG instances
are listed in place of their GPU (id: the instance's `MIG-` UUID, `parent`: the GPU's index); a GPU
in MIG mode without instances cannot run CUDA and is left out, with the reason in `note`.

NVML is reached only through the `Nvml` seam below, so the rest of the harness never imports
`pynvml` and a machine without the driver simply reports no GPUs (with the reason).
"""

from __future__ import annotations

import os
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
    parent: str | None = None        # a MIG instance: the index of the GPU it is carved from

    def to_dict(self) -> dict:
        return asdict(self)


PCI_BUS_ORDER = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}    # every child's environment: indices mean NVML's


@dataclass(frozen=True)
class GpuInventory:
    gpus: tuple[Gpu, ...] = ()
    source: str = "none"             # declared | nvml | none
    note: str = ""                   # why there are no GPUs (or GPUs left out: MIG mode without instances)

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
        self.notes: list[str] = []       # what `devices` left out, and why

    def _nvml(self):
        if self._module is None:
            import pynvml  # provided by nvidia-ml-py (optional extra `gpu`)

            self._module = pynvml
        if not self._initialized:
            self._module.nvmlInit()
            self._initialized = True
        return self._module

    def devices(self) -> list[Gpu]:
        """Every GPU in NVML's (PCI bus) order; a GPU in MIG mode as its MIG instances."""
        nv = self._nvml()
        out = []
        self.notes = []
        for index in range(nv.nvmlDeviceGetCount()):
            handle = nv.nvmlDeviceGetHandleByIndex(index)
            if self._mig_enabled(nv, handle):
                instances = self._mig_instances(nv, handle, str(index))
                if not instances:
                    self.notes.append(f"GPU {index} is in MIG mode without MIG instances (CUDA cannot use it): "
                                      f"create instances (nvidia-smi mig -cgi ... -C) or disable MIG (nvidia-smi -i "
                                      f"{index} -mig 0)")
                out += instances
                continue
            out.append(self._gpu(nv, handle, str(index)))
        return out

    @staticmethod
    def _gpu(nv, handle, gid: str | None, parent: str | None = None) -> Gpu:
        uuid = _text(nv.nvmlDeviceGetUUID(handle))
        mem = nv.nvmlDeviceGetMemoryInfo(handle)
        return Gpu(id=gid or uuid, uuid=uuid, name=_text(nv.nvmlDeviceGetName(handle)),
                   memory_total=int(mem.total), parent=parent)

    @staticmethod
    def _mig_enabled(nv, handle) -> bool:
        try:
            current, _pending = nv.nvmlDeviceGetMigMode(handle)
        except Exception:          # NVMLError_NotSupported: not a MIG-capable GPU (or an old driver)
            return False
        return current == getattr(nv, "NVML_DEVICE_MIG_ENABLE", 1)

    def _mig_instances(self, nv, handle, parent: str) -> list[Gpu]:
        out = []
        for i in range(nv.nvmlDeviceGetMaxMigDeviceCount(handle)):
            try:
                mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(handle, i)
            except Exception:      # NVMLError_NotFound: an empty slot
                continue
            out.append(self._gpu(nv, mig, None, parent=parent))
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


def discover(nvml: Nvml | None = None, env: dict[str, str] | None = None) -> GpuInventory:
    """Probe NVML, narrowed by the engine's own CUDA_VISIBLE_DEVICES (`env`, default os.environ).
    A machine without the library or driver has no GPUs (see `note`); a CUDA_VISIBLE_DEVICES that
    names a GPU this machine does not have is a UsageError."""
    nvml = nvml or Nvml()
    try:
        gpus = nvml.devices()
    except ImportError:
        return GpuInventory((), "none", "nvidia-ml-py is not installed (pip install 'autorl-tui[gpu]')")
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return GpuInventory((), "none", f"NVML unavailable: {exc}")
    notes = list(nvml.notes)
    if not gpus:
        return GpuInventory((), "none", "; ".join(notes) or "NVML reports no GPU")
    visible = (os.environ if env is None else env).get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        gpus = visible_to_engine(gpus, visible)
        if not gpus:
            return GpuInventory((), "none", f"the engine's CUDA_VISIBLE_DEVICES={visible!r} hides every GPU")
    return GpuInventory(tuple(gpus), "nvml", "; ".join(notes))


def visible_to_engine(gpus: list[Gpu], visible: str) -> list[Gpu]:
    """The GPUs an engine started with CUDA_VISIBLE_DEVICES=`visible` may use, in its order. As CUDA
    reads it: entries are indices (here in PCI bus order, nvidia-smi's), UUIDs or unique UUID
    prefixes; a negative index ends the list. An entry naming no GPU here is refused."""
    chosen: list[Gpu] = []
    for item in (p.strip() for p in visible.split(",")):
        if not item:
            continue
        if re.fullmatch(r"-\d+", item):
            break
        if item.isdigit():
            found = [g for g in gpus if g.id == item or g.parent == item]
        else:
            found = [g for g in gpus if g.uuid and g.uuid.startswith(item)]
        if not found or (not item.isdigit() and len(found) > 1):
            have = ", ".join(f"{g.id} ({g.uuid})" if g.uuid and g.uuid != g.id else g.id for g in gpus)
            what = "more than one GPU" if found else "no GPU of this machine"
            raise UsageError(f"the engine's CUDA_VISIBLE_DEVICES={visible!r} names {item!r}, {what} (NVML sees "
                             f"{have}); give indices in nvidia-smi's order or full UUIDs, or unset it")
        chosen += [g for g in found if g not in chosen]
    return chosen


def device_uuids(ids: Iterable[str], nvml: Nvml | None = None) -> list[str]:
    """Device ids as UUIDs, for a Docker device request: the daemon numbers GPUs its own way, a Ray
    node's or a Slurm job's indices may be relative; a UUID is the same card everywhere. Ids NVML
    cannot resolve here (no NVML, declared stand-in ids) are kept as given."""
    ids = [str(i) for i in ids]
    if not any(i.isdigit() for i in ids):
        return ids
    nvml = nvml or Nvml()
    try:
        by_index = {g.id: g.uuid for g in nvml.devices() if g.uuid}
    except Exception:
        return ids
    finally:
        try:
            nvml.close()
        except Exception:
            pass
    return [by_index.get(i, i) for i in ids]


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

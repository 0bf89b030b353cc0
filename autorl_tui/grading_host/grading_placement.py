"""The inputs of a grading's placement, gathered on the engine (the decision itself is pure:
grading/placement.py): the plan's `grading:` choice, the candidate GPUs' free memory from NVML, the
model's config and weight size, whether vLLM is installed, and the protocol's generation volume."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from autorl_tui.executors import gpus as gpu_inventory
from autorl_tui.catalog.grading_choice import GradingChoice
from autorl_tui.grading.placement import GpuMemory, ModelFacts, Placement, decide, model_facts, pick_devices

CONFIG_MAX_BYTES = 1 << 20


def read_model_facts(path: Path) -> ModelFacts:
    """Weights' size and the config fields the decision uses; unknown (defaults) when unreadable:
    the grader itself reports a broken folder."""
    path = Path(path)
    try:
        weights = sum(p.stat().st_size for p in path.iterdir()
                      if p.is_file() and not p.is_symlink() and p.suffix in (".safetensors", ".bin"))
        with open(path / "config.json", "rb") as fh:
            config = json.loads(fh.read(CONFIG_MAX_BYTES))
        return model_facts(config if isinstance(config, dict) else {}, weights)
    except (OSError, ValueError, TypeError, ZeroDivisionError):
        return ModelFacts()


def gpu_memory(ids: list[str], nvml: gpu_inventory.Nvml | None = None) -> list[GpuMemory]:
    """Free and total memory of the given GPUs now; [] when NVML cannot say (declared ids)."""
    return [GpuMemory(s.id, max(0, s.memory_total - s.memory_used), s.memory_total)
            for s in gpu_inventory.sample_utilization(ids, nvml)
            if s.memory_total is not None and s.memory_used is not None]


def vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def _candidates(options: dict, run_gpus: list[str],
                nvml: gpu_inventory.Nvml | None) -> tuple[GradingChoice, list[str], list[GpuMemory]]:
    """The plan's choice, the GPUs it may grade on and their memory now. NVML is opened for this
    and shut down again (nvmlShutdown) unless the caller passed its own."""
    choice = GradingChoice.from_dict(options.get("grading"))
    candidates = list(choice.pool_gpus) if choice.placement == "pool" else list(run_gpus)
    if not candidates:
        return choice, candidates, []
    own = nvml is None
    nvml = nvml or gpu_inventory.Nvml()
    try:
        return choice, candidates, gpu_memory(candidates, nvml)
    finally:
        if own:
            try:
                nvml.close()
            except Exception:     # NVML never opened (no driver here)
                pass


def grading_devices(options: dict, run_gpus: list[str], nvml: gpu_inventory.Nvml | None = None) -> list[str]:
    """The GPUs a run's gradings will use (`pool`: the freest pool GPUs; `shared`: the run's): the
    warm grader started ahead of the first grading starts there (RunGrading.prestart)."""
    choice, _, memory = _candidates(options, run_gpus, nvml)
    return list(pick_devices(choice, list(run_gpus), {m.id: m for m in memory})[1])


def place(options: dict, run_gpus: list[str], model_path: Path, protocol, n_items: int | None,
          nvml: gpu_inventory.Nvml | None = None) -> Placement:
    """The placement of one grading of `model_path` for a run with `run_gpus` whose plan options
    are `options` (validated at plan load: catalog/plans.py)."""
    choice, candidates, memory = _candidates(options, run_gpus, nvml)
    generated = (n_items or 0) * max(1, int(getattr(protocol, "n", 1) or 1)) * int(protocol.max_tokens)
    return decide(choice, run_gpus, memory, read_model_facts(model_path), max_tokens=int(protocol.max_tokens),
                  generated_tokens=generated, vllm_installed=bool(candidates) and vllm_installed())

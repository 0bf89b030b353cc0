"""Base models: the built-in ones (`tiny`, `tiny-alfworld`, `tiny-dsqa`; built locally, cached in the home) or a
local Hugging Face-format folder given by path or placed in the home's `models/` folder."""

from __future__ import annotations

from pathlib import Path

from autorl_tui import registry
from autorl_tui.exitcodes import UsageError


def builtin_models() -> list[str]:
    """Models built locally on demand: the built-ins and those of installed plugins (registry kind
    `models`: a name -> build(out_dir, seed=0, force=False) -> Path)."""
    return registry.names("models")


def build_builtin(name: str, out_dir: Path, seed: int = 0, force: bool = False) -> Path:
    """Build a built-in model into out_dir (deterministic, no downloads; a no-op when it is there)."""
    if name not in registry.entries("models"):
        raise UsageError(f"{name!r} is not a built-in model; built-in: {', '.join(builtin_models())}")
    return registry.load("models", name)(out_dir, seed=seed, force=force)


def is_hf_model_dir(path: Path) -> bool:
    if not (path / "config.json").exists():
        return False
    return any(path.glob("*.safetensors")) or any(path.glob("pytorch_model*.bin"))


def resolve_model(name: str, models_root: Path, build: bool = True) -> Path:
    """Path of the model's HF folder. Builds a built-in model on demand (deterministic, no downloads)."""
    candidate = Path(name).expanduser()
    if candidate.is_absolute() or name.startswith("."):
        if is_hf_model_dir(candidate):
            return candidate.resolve()
        raise UsageError(f"model path {candidate} is not a Hugging Face model folder "
                         f"(needs config.json and *.safetensors or pytorch_model*.bin)")
    local = models_root / name
    if is_hf_model_dir(local):
        return local
    if name in registry.entries("models"):
        if not build:
            raise UsageError(f"model {name} is not built yet: run `autorl-tui models build {name}`")
        return build_builtin(name, local)
    raise UsageError(f"unknown model {name!r}: give a path to a local Hugging Face model folder, put one in "
                     f"{models_root}/{name}, or use a built-in model ({', '.join(builtin_models())})")

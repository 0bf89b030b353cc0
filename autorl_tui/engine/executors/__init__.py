"""Executors start an agent for one run attempt and can kill or re-adopt it.

The seam for other back ends (Ray, Kubernetes, Slurm): nothing in the engine may assume the
agent runs on the harness's host; it talks to an `AgentHandle` and tails the files it names."""

from autorl_tui import registry
from autorl_tui.engine.executors.base import AgentHandle, Executor, LaunchSpec, Mount

__all__ = ["AgentHandle", "Executor", "LaunchSpec", "Mount"]


def get_executor(name: str, **options) -> "Executor":
    """A new executor; executors are plugins (`autorl_tui/registry.py`, kind `executors`)."""
    if name not in registry.entries("executors"):
        raise ValueError(f"unknown executor {name!r} ({', '.join(registry.names('executors'))})")
    return registry.load("executors", name)(**options)

"""Executors start an agent for one run attempt and can kill or re-adopt it.

The seam for other back ends (Ray, Kubernetes, Slurm): nothing in the engine may assume the
agent runs on the harness's host; it talks to an `AgentHandle` and tails the files it names."""

from autorl_tui import registry
from autorl_tui.executors.base import AgentHandle, Executor, LaunchSpec, Mount

__all__ = ["AgentHandle", "Executor", "LaunchSpec", "Mount", "executor_class"]


def executor_class(name: str) -> type[Executor]:
    """A registered executor's class (its behaviour before one is built: `Executor`'s class attributes)."""
    try:
        return registry.load("executors", name)
    except registry.PluginError as exc:
        raise ValueError(str(exc)) from None


def executor_classes() -> list[tuple[str, type[Executor]]]:
    return [(name, executor_class(name)) for name in registry.names("executors")]


def cluster_executors() -> list[tuple[str, type[Executor]]]:
    """The executors whose runs a cluster places (not this host's slots)."""
    return [(name, cls) for name, cls in executor_classes() if not cls.uses_host_slots]

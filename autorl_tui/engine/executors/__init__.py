"""Executors start an agent for one run attempt and can kill or re-adopt it.

The seam for other back ends (Ray, Kubernetes, Slurm): nothing in the engine may assume the
agent runs on the harness's host; it talks to an `AgentHandle` and tails the files it names."""

from autorl_tui.engine.executors.base import AgentHandle, Executor, LaunchSpec, Mount

__all__ = ["AgentHandle", "Executor", "LaunchSpec", "Mount"]


def get_executor(name: str, **options) -> "Executor":
    if name == "local":
        from autorl_tui.engine.executors.local import LocalExecutor

        return LocalExecutor(**options)
    if name == "docker":
        from autorl_tui.engine.executors.docker import DockerExecutor

        return DockerExecutor(**options)
    raise ValueError(f"unknown executor {name!r} (local, docker)")

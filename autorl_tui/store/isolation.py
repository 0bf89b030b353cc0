"""How a stored run's agent was isolated, read from its recorded spec (plans.isolation_of writes it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autorl_tui.store.run_spec import RunSpec

# Runs recorded before specs carried their isolation: only a container's was certain then. Frozen
# history, not a list of executors: every run recorded since names its isolation (Executor.isolation_label).
LEGACY_ISOLATION = {"docker": "docker"}


def _spec(spec: RunSpec | Mapping[str, Any] | None) -> RunSpec:
    return spec if isinstance(spec, RunSpec) else RunSpec.from_dict(spec)


def recorded_isolation(spec: RunSpec | Mapping[str, Any] | None, executor: str | None) -> str:
    """The isolation of a stored run; runs recorded before the field existed say `unrecorded`."""
    return _spec(spec).isolation or LEGACY_ISOLATION.get(executor or "", "unrecorded")


def recorded_exposures(spec: RunSpec | Mapping[str, Any] | None) -> list[str]:
    """What a stored run's agent could reach beyond its sandbox, as its plan and agent spec said:
    `network: host` (the host's network) and `ray cluster without token authentication`."""
    spec = _spec(spec)
    out = []
    if spec.agent.get("network") == "host":
        out.append("network: host")
    if (spec.option("cluster", {}).get("auth")) == "none":
        out.append("ray cluster without token authentication")
    return out

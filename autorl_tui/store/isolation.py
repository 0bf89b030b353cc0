"""How a stored run's agent was isolated, read from its recorded spec (plans.isolation_of writes it)."""

from __future__ import annotations


# Runs recorded before specs carried their isolation: only a container's was certain then. Frozen
# history, not a list of executors: every run recorded since names its isolation (Executor.isolation_label).
LEGACY_ISOLATION = {"docker": "docker"}


def recorded_isolation(spec: dict | None, executor: str | None) -> str:
    """The isolation of a stored run; runs recorded before the field existed say `unrecorded`."""
    value = (spec or {}).get("isolation") if isinstance(spec, dict) else None
    return value or LEGACY_ISOLATION.get(executor or "", "unrecorded")


def recorded_exposures(spec: dict | None) -> list[str]:
    """What a stored run's agent could reach beyond its sandbox, as its plan and agent spec said:
    `network: host` (the host's network) and `ray cluster without token authentication`."""
    spec = spec if isinstance(spec, dict) else {}
    out = []
    if ((spec.get("agent") or {}).get("network")) == "host":
        out.append("network: host")
    if (((spec.get("options") or {}).get("cluster") or {}).get("auth")) == "none":
        out.append("ray cluster without token authentication")
    return out

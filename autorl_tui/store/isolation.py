"""How a stored run's agent was isolated, read from its recorded spec (plans.isolation_of writes it)."""

from __future__ import annotations


def recorded_isolation(spec: dict | None, executor: str | None) -> str:
    """The isolation of a stored run; runs recorded before the field existed say `unrecorded`."""
    value = (spec or {}).get("isolation") if isinstance(spec, dict) else None
    return value or ("docker" if executor == "docker" else "unrecorded")

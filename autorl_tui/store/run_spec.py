"""RunSpec: what a run is, fixed when its plan is validated (`Engine._validate`), carried to the
supervisor and its jobs, and stored as the run's `spec` JSON column.

One frozen value from plan validation to the report: the engine builds it from the typed
`RunRequest` and the task card, the store keeps `to_dict()` (the JSON shape every version has
written: reports and exports read it), and every reader gets it back with `from_dict()`.

Specs stored by older versions (or written by an import) may lack keys: `from_dict` tolerates
any subset, with the defaults below (`isolation` None reads as "unrecorded" in reports), and keeps
keys it does not know in `extra`, so that `to_dict()` gives them back. Here because the store
imports nothing of ours and everything above it (engine, reports, interop) reads a run's spec."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

# Specs written before the executor was recorded: those runs ran on the local executor (frozen
# history; a plan's default executor is catalog.plans.DEFAULT_EXECUTOR).
LEGACY_EXECUTOR = "local"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSpec:
    task: dict[str, Any] = field(default_factory=dict)       # the task card (TaskCard.to_dict(): id, dir, ...)
    agent: dict[str, Any] = field(default_factory=dict)      # the agent spec (AgentSpec.to_dict(): name, source, ...)
    model: str | dict[str, Any] = ""   # as the plan named it: a built-in model's name or a path
                                       # ({name, path} in specs of early versions)
    model_name: str = ""             # the workspace's name for it (a path's last part)
    seed: int = 0
    executor: str | None = None      # None: an old spec; the run ran on LEGACY_EXECUTOR
    driver: str | None = None        # the driver LLM, when the plan names one
    options: dict[str, Any] = field(default_factory=dict)    # the plan's run options (driver_url, limits, ...)
    protocol: dict[str, Any] = field(default_factory=dict)   # the evaluation protocol (Protocol.to_dict())
    protocol_name: str | None = None  # the card's named protocol (None: its default)
    level: int | None = None
    data_origin: Any = None          # official files and checksums, a local copy, or a stand-in
    isolation: str | None = None     # bwrap, docker or none (plans.isolation_of); None: not recorded
    imported: dict[str, Any] | None = None   # a run imported from another harness: where from
    extra: dict[str, Any] = field(default_factory=dict)      # stored keys this version does not know
    # Known keys the stored spec did not have (an old or imported run's): left out of to_dict() again,
    # so that a stored spec reads back and writes out as it was. Not part of the value (compare=False).
    absent: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    # ------------------------------------------------------------------ (de)serialising
    @classmethod
    def from_dict(cls, raw: RunSpec | Mapping[str, Any] | None) -> RunSpec:
        """The spec of a stored `spec` column (decoded); a missing or non-object column is an empty spec."""
        if isinstance(raw, RunSpec):
            return raw
        raw = raw if isinstance(raw, Mapping) else {}
        known = {f.name for f in fields(cls)} - {"extra", "absent"}
        values = {k: v for k, v in raw.items() if k in known and v is not None}
        for name in ("task", "agent", "options", "protocol"):
            if not isinstance(values.get(name, {}), Mapping):
                values.pop(name)
        return cls(**values, extra={k: v for k, v in raw.items() if k not in known},
                   absent=frozenset(known - set(raw) - {"imported"}))

    @classmethod
    def from_json(cls, text: str | bytes | Mapping[str, Any] | None) -> RunSpec:
        """From the stored JSON text (or an already decoded object)."""
        return cls.from_dict(json.loads(text) if isinstance(text, str | bytes) else text)

    def to_dict(self) -> dict[str, Any]:
        """The stored shape: every key a validated run has always had (in that order; but those
        a stored spec lacked), `imported` for an imported run, then the keys kept in `extra`."""
        out = {f.name: getattr(self, f.name) for f in fields(self)
               if f.name not in ("imported", "extra", "absent") and f.name not in self.absent}
        if self.imported is not None:
            out["imported"] = self.imported
        return {**out, **self.extra}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    # ------------------------------------------------------------------ what readers ask
    @property
    def model_path(self) -> str | None:
        """The base model's path, where the spec recorded one (early versions' {name, path})."""
        return self.model.get("path") if isinstance(self.model, dict) else self.extra.get("model_path")

    @property
    def executor_name(self) -> str:
        """The executor the run runs on (an old spec without one: LEGACY_EXECUTOR)."""
        return self.executor or LEGACY_EXECUTOR

    @property
    def isolated(self) -> bool:
        """False only when the plan said `isolation: none` (an old spec: isolated)."""
        return self.isolation != "none"

    def option(self, name: str, default: Any = None) -> Any:
        """One of the plan's run options (`driver_url`, `image`, `limits`, `log_cap`, `overlay`,
        `cluster`, ...); `default` when the plan did not give it (or gave null)."""
        value = self.options.get(name)
        return default if value is None else value

"""A plan's `grading:` choice (docs/grading.md, "GPU"): where its runs' gradings go and which
backend they prefer. Data only; the decision that uses it is grading/placement.py."""

from __future__ import annotations

import re
from dataclasses import dataclass

PLACEMENTS = ("shared", "pool")
BACKENDS = ("auto", "vllm", "transformers")
GRADING_KEYS = {"placement", "pool_gpus", "backend"}
_GPU_ID = re.compile(r"^(\d+|GPU-[0-9A-Za-z-]+|MIG-[0-9A-Za-z/-]+)$")


class PlacementError(ValueError):
    """The plan's `grading:` settings are not usable; the message says what to fix."""


@dataclass(frozen=True)
class GradingChoice:
    """The plan's choice (`grading:` in a plan); defaults: shared, auto."""
    placement: str = "shared"
    pool_gpus: tuple[str, ...] = ()
    backend: str = "auto"

    @classmethod
    def from_dict(cls, raw: dict | None, where: str = "plan") -> "GradingChoice":
        raw = raw or {}
        if not isinstance(raw, dict):
            raise PlacementError(f"{where}: `grading` must be a mapping, e.g. grading: {{placement: pool, "
                                 f"pool_gpus: [6, 7]}}")
        unknown = sorted(set(raw) - GRADING_KEYS)
        if unknown:
            raise PlacementError(f"{where}: unknown key(s) {', '.join(unknown)} under `grading`; known: "
                                 f"{', '.join(sorted(GRADING_KEYS))}")
        placement = raw.get("placement", "shared")
        if placement not in PLACEMENTS:
            raise PlacementError(f"{where}: grading.placement {placement!r} must be shared (grade on the run's "
                                 f"own GPUs) or pool (grade on grading.pool_gpus)")
        backend = raw.get("backend", "auto")
        if backend not in BACKENDS:
            raise PlacementError(f"{where}: grading.backend {backend!r} must be one of {', '.join(BACKENDS)}")
        pool = raw.get("pool_gpus", [])
        if isinstance(pool, (str, int)) and not isinstance(pool, bool):
            pool = [p for p in str(pool).split(",") if p.strip()]
        if not isinstance(pool, list) or not all(isinstance(p, (str, int)) and not isinstance(p, bool)
                                                 and str(p).strip() for p in pool):
            raise PlacementError(f"{where}: grading.pool_gpus must be a list of GPU ids, e.g. [6, 7]")
        pool_ids = tuple(str(p).strip() for p in pool)
        bad = [p for p in pool_ids if not _GPU_ID.match(p)]
        if bad:
            raise PlacementError(f"{where}: grading.pool_gpus has {bad[0]!r}, not a GPU id; give indices like "
                                 f"6, 7 or UUIDs like GPU-8f3c...")
        if len(set(pool_ids)) != len(pool_ids):
            raise PlacementError(f"{where}: grading.pool_gpus lists a GPU more than once: {list(pool_ids)}")
        if placement == "pool" and not pool_ids:
            raise PlacementError(f"{where}: grading.placement pool needs grading.pool_gpus (the GPUs kept for "
                                 f"grading, e.g. pool_gpus: [7])")
        if placement == "shared" and pool_ids:
            raise PlacementError(f"{where}: grading.pool_gpus is set but grading.placement is shared; set "
                                 f"placement: pool to grade there, or drop pool_gpus")
        return cls(placement=placement, pool_gpus=pool_ids, backend=backend)

    def to_dict(self) -> dict:
        return {"placement": self.placement, "pool_gpus": list(self.pool_gpus), "backend": self.backend}

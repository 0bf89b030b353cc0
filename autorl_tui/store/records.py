"""Typed rows for the store's readers: what `store.queries` returns.

A record's fields are its table's columns, in column order (tests/unit/test_store_queries.py checks
them against the migrated schema, so a renamed or added column is caught here, not in a caller).
JSON columns arrive decoded. Columns added by a later migration default to None, so a reader can
open a store an older autorl-tui wrote."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Self

from autorl_tui.store.run_spec import RunSpec

Rows = Callable[[str, Iterable], list[dict]]
"""A row source: (sql, params) -> rows as dicts. `Store.query`, or a read-only connection's."""


def _decoded(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


@dataclass(frozen=True, kw_only=True)
class Record:
    TABLE = ""
    JSON: ClassVar[tuple[str, ...]] = ()
    TYPED: ClassVar[dict[str, Any]] = {}    # JSON column -> its type (a class with from_dict/to_dict)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Self:
        """The record of one row (a sqlite3.Row or dict); columns this record does not know are left out.
        A JSON column with a type in TYPED arrives as that type (`from_dict` of the decoded value)."""
        keys = set(row.keys())
        values = {f.name: (_decoded(row[f.name]) if f.name in cls.JSON else row[f.name])
                  for f in fields(cls) if f.name in keys}
        return cls(**{k: cls.TYPED[k].from_dict(v) if k in cls.TYPED else v for k, v in values.items()})

    def to_dict(self) -> dict[str, Any]:
        """Column name to value, in column order (JSON columns decoded, typed ones as their dicts)."""
        return {f.name: (getattr(self, f.name).to_dict() if f.name in self.TYPED else getattr(self, f.name))
                for f in fields(self)}


@dataclass(frozen=True, kw_only=True)
class RunRecord(Record):
    """A `runs` row: the one typed row of the table. The engine holds its live run as one
    (RunJournal.run); the columns the schema defaults are defaulted here the same way, so a new
    run is a RunRecord too (Engine.enqueue_plan). Rows that travel (events, the engine's socket)
    are its `to_dict()`."""
    TABLE = "runs"
    JSON = ("spec",)
    TYPED = {"spec": RunSpec}

    id: str
    plan_id: str | None = None
    plan_name: str | None = None
    task: str
    level: int | None = None
    agent: str
    model: str
    driver: str | None = None
    seed: int = 0
    budget_s: float
    executor: str = "local"
    gpus_requested: int = 0
    priority: int = 0
    queue_pos: float = 0.0
    state: str
    failure_source: str | None = None
    end_reason: str | None = None
    created_at: float
    started_at: float | None = None
    deadline: float | None = None
    ended_at: float | None = None
    baseline_score: float | None = None
    baseline_dev_score: float | None = None
    best_dev_score: float | None = None
    best_submission_id: int | None = None
    test_score: float | None = None
    improvement: float | None = None
    dev_improvement: float | None = None
    workspace: str | None = None
    spec: RunSpec = field(default_factory=RunSpec)
    current_attempt: int = 0
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    not_before: float | None = None          # migration 2
    imported_from: str | None = None         # migration 4
    waiting: str | None = None               # migration 7: e.g. `cluster` (executor ray)

    @property
    def wall_s(self) -> float | None:
        """Queued to ended, for an ended run."""
        return (self.ended_at - self.created_at) if self.ended_at else None


@dataclass(frozen=True, kw_only=True)
class SubmissionRecord(Record):
    """A `submissions` row, `metrics` decoded: the one typed row of the table. The engine's
    submission desk reads and writes these (store/run_state.py returns them); rows that travel
    (the SubmissionUpdated event, the engine's socket) are its `to_dict()`."""
    TABLE = "submissions"
    JSON = ("metrics",)

    id: int
    run_id: str
    attempt: int | None
    seq: int
    path: str
    snapshot_path: str | None
    content_hash: str | None
    revision_id: int | None
    received_at: float
    graded_at: float | None
    status: str      # received | grading | scored | rejected | error | duplicate
    score: float | None
    improvement: float | None
    error: str | None
    duplicate_of: int | None
    metrics: dict[str, Any] | None
    inference_s: float | None
    grading_s: float | None
    test_score: float | None


@dataclass(frozen=True)
class CpuUsage:
    """A run's sampled CPU use: the mean over its resource samples (None without samples)."""

    mean_percent: float | None
    samples: int


RECORDS: tuple[type[Record], ...] = (RunRecord, SubmissionRecord)

"""Typed rows for the store's readers: what `store.queries` returns.

A record's fields are its table's columns, in column order (tests/unit/test_store_queries.py checks
them against the migrated schema, so a renamed or added column is caught here, not in a caller).
JSON columns arrive decoded. Columns added by a later migration default to None, so a reader can
open a store an older autorl-tui wrote."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Self

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
    JSON = ()

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Self:
        """The record of one row (a sqlite3.Row or dict); columns this record does not know are left out."""
        keys = set(row.keys())
        return cls(**{f.name: (_decoded(row[f.name]) if f.name in cls.JSON else row[f.name])
                      for f in fields(cls) if f.name in keys})

    def to_dict(self) -> dict[str, Any]:
        """Column name to value, in column order (JSON columns decoded)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, kw_only=True)
class RunRecord(Record):
    TABLE = "runs"
    JSON = ("spec",)

    id: str
    plan_id: str | None
    plan_name: str | None
    task: str
    level: int | None
    agent: str
    model: str
    driver: str | None
    seed: int
    budget_s: float
    executor: str
    gpus_requested: int
    priority: int
    queue_pos: float
    state: str
    failure_source: str | None
    end_reason: str | None
    created_at: float
    started_at: float | None
    deadline: float | None
    ended_at: float | None
    baseline_score: float | None
    baseline_dev_score: float | None
    best_dev_score: float | None
    best_submission_id: int | None
    test_score: float | None
    improvement: float | None
    dev_improvement: float | None
    workspace: str | None
    spec: Any
    current_attempt: int
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None
    not_before: float | None = None          # migration 2
    imported_from: str | None = None         # migration 4
    waiting: str | None = None               # migration 7: e.g. `cluster` (executor ray)

    @property
    def wall_s(self) -> float | None:
        """Queued to ended, for an ended run."""
        return (self.ended_at - self.created_at) if self.ended_at else None


@dataclass(frozen=True, kw_only=True)
class SubmissionRecord(Record):
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
    status: str
    score: float | None
    improvement: float | None
    error: str | None
    duplicate_of: int | None
    metrics: Any
    inference_s: float | None
    grading_s: float | None
    test_score: float | None


@dataclass(frozen=True)
class CpuUsage:
    """A run's sampled CPU use: the mean over its resource samples (None without samples)."""

    mean_percent: float | None
    samples: int


RECORDS: tuple[type[Record], ...] = (RunRecord, SubmissionRecord)

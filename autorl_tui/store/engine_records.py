"""The shapes of the rows the engine reads back from the store (store/run_state.py).

Full rows stay dicts (they travel as they are in events and over the engine's socket), typed here
so that a column's name is written in one place; narrow results are dataclasses. A `runs` row has
one typed form, store/records.py's RunRecord (the engine's live run is one: RunJournal.run), and
so has a `submissions` row, store/records.py's SubmissionRecord."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict


class AttemptRow(TypedDict, total=False):
    """An `attempts` row, `gpus` and `offsets` decoded."""
    id: int
    run_id: str
    number: int
    state: str
    executor: str
    started_at: float | None
    ended_at: float | None
    pid: int | None
    container_id: str | None
    gpus: list[str] | None
    exit_code: int | None
    error: str | None
    log_dir: str | None
    offsets: dict[str, Any] | None
    grading_url: str | None


class BaselineRow(TypedDict, total=False):
    """A `baselines` row, `metrics` decoded."""
    id: int
    task: str
    model: str
    protocol_hash: str
    grader_version: str
    split: str
    score: float
    metrics: dict[str, Any] | None
    created_at: float
    grading: str | None      # migration 7: "BACKEND/DEVICE" it was graded with (transformers/cpu, vllm/cuda)


class RevisionMeta(TypedDict):
    """A code revision without its manifest (file contents are blobs)."""
    id: int
    seq: int
    ts: float
    reason: str
    n_files: int
    total_bytes: int


@dataclass(frozen=True)
class QueueEntry:
    """A queued run, as the scheduler needs it."""
    run_id: str
    priority: int
    queue_pos: float
    gpus_requested: int
    created_at: float
    budget_s: float
    not_before: float | None
    executor: str = "local"


@dataclass(frozen=True)
class LogVolume:
    """How many agent log events (stdout, stderr, actions) a run has stored, and their size."""
    events: int
    bytes: int


@dataclass(frozen=True)
class GpuHolder:
    """The current attempt of an active run and the devices it holds."""
    run_id: str
    gpus: list[str]

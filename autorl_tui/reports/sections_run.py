"""The run report's JSON (a "rollout card", reports/run_report.py) as typed sections: the report is
built from them and reports/schemas/run_report.schema.json is generated from them
(reports/typed_json.py). Scores are on a 0-100 scale; times in seconds."""

from __future__ import annotations

from typing import Any, Literal

from autorl_tui.reports.typed_json import Document, key, optional, section

# What a report says of a run's isolation: Executor.isolation_label's values, or store/isolation.py's
# `unrecorded` for a run recorded before its isolation was.
ISOLATIONS = ["bwrap", "docker", "none", "unrecorded"]
BAND_ABOUT = ("paired bootstrap band of the held-out accuracy change trained \u2212 base, in points: the run's "
              "held-out questions resampled with replacement (fixed seed); null without paired held-out samples "
              "(or, in a cell, with other than one valid run)")
@section
class Band:
    n: int = key("held-out questions paired", minimum=1)
    observed: float = key("mean change over the questions, points")
    low: float
    high: float
    resamples: int = key(minimum=1)
    seed: int
    level: float = key(exclusiveMinimum=0, exclusiveMaximum=1)


@section
class RunSection:
    run_id: str
    plan_name: str | None
    task: str
    level: int | None
    agent: str
    model: str
    driver: str | None = key("driver LLM, when known")
    seed: int
    budget_s: float
    executor: str
    gpus_requested: int | None
    state: str
    failure_source: str | None
    end_reason: str | None
    created_at: float | None
    started_at: float | None
    deadline: float | None
    ended_at: float | None
    current_attempt: int | None
    isolation: str = key(
        "how the agent was isolated: bwrap (local sandbox), docker, none (UNISOLATED: plan said "
        "isolation: none), unrecorded (before this was recorded)", enum=ISOLATIONS)
    exposures: list[str] = key(
        "what the agent could reach beyond its sandbox, as the plan and agent spec said: `network: "
        "host`, `ray cluster without token authentication` (docs/security.md)")


@section
class Protocol:
    temperature: float | None
    top_p: float | None
    n: int | None
    max_tokens: int | None
    max_steps: int | None
    k: list[int] | None
    splits: list[str]
    scorer: str | None
    primary_metric: str | None
    name: str = key("the task card's named protocol (`default` for a single-protocol card)")
    about: str | None = optional()
    data_origin: dict[str, Any] | None = optional("official files and checksums, a local copy, or a stand-in")


@section
class ErrorEvent:
    t_s: float | None
    kind: str
    message: str
    traceback: str | None


@section
class Cause:
    errors: list[ErrorEvent]
    stderr_tail: list[str]


@section
class Outcome:
    baseline_score: float | None = key("base model on the held-out test split (runs.baseline_score)")
    best_dev_score: float | None
    test_score: float | None
    improvement: float | None = key("test_score - baseline_score (runs.improvement), points")
    dev_improvement: float | None = key("best_dev_score - baseline_dev_score")
    best_submission_id: int | None
    best_submission_seq: int | None
    state: str
    end_reason: str | None
    failure_source: str | None
    baseline_dev_score: float | None = key(
        "base model on dev (runs.baseline_dev_score; older stores: runs.baseline_score)")
    imported_from: str | None = optional(
        "where an imported run came from (e.g. autorl-bench:PATH); such a run has no held-out test "
        "of ours")
    held_out_band: Band | None
    cause: Cause | None = key(
        "a failed or lost run only: its newest error events (with the harness's traceback when one "
        "was recorded) and the agent's last stderr lines")


@section
class TimelineSubmission:
    submission_id: int
    seq: int
    status: str
    score: float | None
    improvement: float | None
    test_score: float | None
    t_s: float | None
    latency_s: float | None
    inference_s: float | None
    grading_s: float | None
    best_so_far: float | None = key("running max of dev score by seq")
    is_best: bool | None
    error: str | None
    revision_id: int | None
    path: str
    metrics: dict[str, Any] | str | None = key(schema={'type': ['object', 'null', 'string']})


@section
class Timeline:
    n_submissions: int
    n_scored: int
    n_dropped: int
    time_to_first_valid_s: float | None
    time_to_best_s: float | None
    wall_s: float | None
    agent_s: float | None = optional(
        "seconds the agent ran (start to its last attempt's end); the harness's grading after it is "
        "not counted")
    budget_used: float | None = key("agent_s / budget_s (the agent's time only)")
    submissions: list[TimelineSubmission]


@section
class PhaseTotals:
    explore: float
    write_code: float
    train: float
    evaluate: float
    idle: float


@section
class PhaseSegment:
    phase: Literal["explore", "write_code", "train", "evaluate", "idle"]
    start_s: float
    end_s: float


@section
class Phases:
    bucket_s: float | None
    idle_gap_s: float
    span_s: float | None
    totals_s: PhaseTotals
    segments: list[PhaseSegment]


@section
class MetricPoint:
    step: int | None
    t_s: float | None
    mean: float | None
    min: float | None
    max: float | None
    n: int
    n_bad: int


@section
class MetricSeries:
    name: str
    source: str
    n_points: int
    n_nan: int
    n_inf: int
    downsampled: bool
    x_axis: Literal["step", "t_s"]
    points: list[MetricPoint] = key("equal-count buckets in time order (one point per bucket)")
    session: int | None = optional(
        "training session number within the run (null: a store from before sessions)")
    session_id: int | None = optional()
    session_kind: str | None = optional()


@section
class MetricStat:
    name: str
    source: str
    n_points: int
    median: float | None
    mad: float | None
    max: float | None
    min: float | None
    step_at_max: int | None
    head_mean: float | None
    tail_mean: float | None
    first_value: float | None
    last_value: float | None
    n_nan: int
    n_inf: int
    first_bad_step: int | None
    first_t_s: float | None
    last_t_s: float | None
    phase: str | None
    session_seq: int | None = optional()
    session_id: int | None = optional()
    session_kind: str | None = optional()


@section
class CheckWindow:
    seq: int
    t_s: float | None
    score: float | None
    reward_mean: float | None
    n_points: int
    session: int | None = optional(
        "training session number within the run (null: a store from before sessions)")
    session_id: int | None = optional()
    session_kind: str | None = optional()
    series: str = optional()


@section
class DangerCheck:
    signal: Literal["reward_up_dev_down", "kl_spike", "entropy_collapse", "length_blowup", "non_finite"]
    title: str
    series: str | None
    status: Literal["flagged", "ok", "not_applicable"]
    evidence: list[dict[str, Any]]
    message: str
    windows: list[CheckWindow] = optional(
        "reward check only: per scored submission, the dev score and the mean reward logged since "
        "the previous scored submission")
    sessions: list[int | None] = optional("the training sessions the check was judged in (each on its own)")


@section
class TrainingSession:
    id: int
    seq: int
    attempt: int | None = optional()
    kind: str
    sources: list[str]
    started_at: float
    ended_at: float | None


@section
class Metrics:
    series: list[MetricSeries]
    stats: list[MetricStat]
    checks: list[DangerCheck]
    n_series: int
    max_points_per_series: int
    sessions: list[TrainingSession] = optional("training sessions of the run")


@section
class FileDiff:
    path: str
    status: Literal["added", "removed", "modified"]
    added: int
    removed: int
    binary: bool
    diff: str
    truncated: bool
    ran: bool = optional("the submitted pipeline ran or named this file (listed first)")


@section
class SubmissionDiff:
    submission_seq: int
    status: str
    revision_seq: int | None
    base: str | None = optional()
    n_files: int | None = optional()
    total_bytes: int | None = optional()
    skipped: list[str] = optional()
    files: list[FileDiff]
    lines_added: int
    lines_removed: int
    truncated: bool
    unchanged: bool = optional("the same code as the previous submission (no diff repeated)")


@section
class Revisions:
    n_revisions: int
    n_change: int
    by_submission: list[SubmissionDiff]


@section
class EventSection:
    category: str
    n: int
    shown: int
    omitted: int
    entries: list[dict[str, Any]]


@section
class Events:
    total: int
    shown: int
    sections: list[EventSection]


@section
class SampleCount:
    kind: str
    n: int


@section
class Badcase:
    kind: str
    n: int
    examples: list[dict[str, Any]]


@section
class Samples:
    submission_id: int | None
    submission_seq: int | None
    n: int
    counts: list[SampleCount]
    badcases: list[Badcase]
    baseline_id: int | None
    versus_baseline: dict[str, Any] | None


@section
class Drop:
    submission_id: int
    seq: int
    status: str
    path: str
    received_at: float
    t_s: float | None
    drop_kind: Literal["duplicate", "rejected", "timed_out", "error", "never_graded"]
    reason: str


@section
class HostLoad:
    n_samples: int
    load1_mean: float | None
    load1_max: float | None
    load5_mean: float | None
    load15_mean: float | None


@section
class Cost:
    wall_s: float | None
    agent_s: float | None = optional(
        "seconds the agent ran (start to its last attempt's end); the harness's grading after it is "
        "not counted")
    budget_s: float | None
    budget_used: float | None = key("agent_s / budget_s (the agent's time only)")
    cpu_hours: float | None
    mean_cpu_percent: float | None
    peak_rss_bytes: int | None
    resource_samples: int
    gpu_busy_hours: float | None
    gpu_allocated_hours: float | None
    attempts: int
    inference_s: float | None
    grading_s: float | None
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None
    host_load: HostLoad | None = key(
        "the host's load average over the run's resource samples (null without samples or in a "
        "store written before it was recorded)")


@section
class Attempt:
    number: int
    state: str
    executor: str
    start_s: float | None
    duration_s: float | None
    exit_code: int | None
    error: str | None
    gpus: Any


@section
class AutorlBench:
    valid_submission_rate: float | None
    first_valid_idx: int | None
    first_valid_delay: int | None
    score_trajectory: list[float]
    time_to_first_improvement: int | None
    time_to_best: int | None
    time_used_ratio: float | None
    monotonic_ratio: float | None
    copy_model_count: int | None
    last_submit_gap: int | None


@section
class Finding:
    OPEN = True
    id: int
    run_id: str
    submission_id: int | None = optional()
    submission_seq: int | None = optional()
    ts: float
    kind: str = key("provenance | contamination | honey_token | protected_path | sweep")
    severity: str = key(enum=['info', 'warning', 'critical'])
    summary: str
    evidence: Any = key("what the summary rests on (docs/trust.md)")


@section
class TrustSummary:
    """A run's trust findings counted (reports/trust.py `summary`); the compare report's per run."""
    OPEN = True
    n_findings: int
    n_flags: int
    flagged: bool
    worst: str = key("none (nothing checked), clean (checked, nothing flagged), warning or critical")
    by_kind: dict[str, int]
    lines: list[str]


@section
class Trust(TrustSummary):
    findings: list[Finding]
    provenance: list[dict[str, Any]]


@section
class CostPerPoint:
    OPEN = True
    improvement: float | None
    tokens: float | None
    cost_usd: float | None
    gpu_hours: float | None
    agent_hours: float | None
    tokens_per_point: float | None
    usd_per_point: float | None
    gpu_hours_per_point: float | None
    agent_hours_per_point: float | None


def head(name: str, title: str, description: str) -> dict[str, str]:
    """A report schema's head: its draft, id, title and description."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://autorl-tui.invalid/schemas/{name}.schema.json", "title": title,
            "description": description}


@section
class Report(Document):
    """What every report document starts with (its `schema` is its own const)."""
    DEFS = {"band": (Band, BAND_ABOUT)}
    schema: str
    schema_version: int = key(schema={"const": 1})
    generator: str
    generated_at: float


@section
class RunReport(Report):
    HEAD = head("run_report", "autorl-tui run report",
                "One run's rollout card. Scores are on a 0-100 scale; times in seconds; *_t_s / t_s "
                "are seconds since the agent started (runs.started_at). Every number comes from the "
                "store: runs, submissions, metrics, events, revisions/blobs, samples, baselines, "
                "resources, attempts.")
    schema: str = key(schema={"const": "autorl-tui/run-report"})
    store: str = key("path of the SQLite store the report was read from")
    run: RunSection = key("runs row")
    protocol: Protocol = key("evaluation protocol from runs.spec")
    model_path: str | None
    outcome: Outcome
    timeline: Timeline
    phases: Phases = key("inferred phases (heuristic documented in docs/reports.md)")
    metrics: Metrics
    revisions: Revisions
    events: Events = key("the action log by category, capped (first log_head and last log_tail per category)")
    samples: Samples
    drops: list[Drop]
    cost: Cost
    limits: dict[str, int]
    attempts: list[Attempt] = key(
        "attempts rows (a retry of an infrastructure failure is a new attempt); start_s relative to "
        "the run's start")
    autorl_bench: AutorlBench = key(
        "AutoRL-Bench's ten run diagnostics (its reports/metrics.json), computed as its "
        "core/metrics.py does: failed gradings score 0, times are whole seconds from the agent's "
        "start (docs/autorl-bench.md)")
    trust: Trust = key(
        "trust findings: model provenance of every submission, contamination, honey-token reads, "
        "attempts on protected paths (docs/trust.md)")
    cost_per_point: CostPerPoint = key(
        "cost per point of held-out improvement (null per-point figures when the run did not "
        "improve)")

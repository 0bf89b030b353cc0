"""The comparison report's JSON (reports/compare_report.py) as typed sections: the report is built
from them and reports/schemas/compare_report.schema.json is generated from them (reports/typed_json.py)."""

from __future__ import annotations

from typing import Any, Literal

from autorl_tui.reports.sections_run import ISOLATIONS, Band, CostPerPoint, Report, TrustSummary, head
from autorl_tui.reports.typed_json import key, optional, section
@section
class Selection:
    plan: str | None
    run_ids: list[str]
    primary_task: str | None


@section
class ComparedRun:
    run_id: str
    task: str
    level: int | None
    agent: str
    driver: str | None
    model: str
    seed: int
    state: str
    baseline_score: float | None
    best_dev_score: float | None
    test_score: float | None
    improvement: float | None
    n_submissions: int
    n_dropped: int
    wall_s: float | None
    baseline_dev_score: float | None
    imported_from: str | None = optional(
        "set for a run imported from another harness: it has no held-out test of ours")
    isolation: str = key(
        "how the agent was isolated: bwrap (local sandbox), docker, none (UNISOLATED: plan said "
        "isolation: none), unrecorded (before this was recorded)", enum=ISOLATIONS)
    held_out_band: Band | None
    trust: TrustSummary
    cost_per_point: CostPerPoint = key(
        "cost per point of held-out improvement (null per-point figures when the run did not "
        "improve)")
    exposures: list[str] = key(
        "what the agent could reach beyond its sandbox, as the plan and agent spec said: `network: "
        "host`, `ray cluster without token authentication` (docs/security.md)")


@section
class CellStats:
    """What a cell of runs (one agent's on a task, a level or with a driver) says about their improvements."""
    n: int
    mean: float | None
    std: float | None
    stderr: float | None
    min: float | None
    max: float | None
    spread: float | None
    n_runs: int
    n_missing: int
    run_ids: list[str]
    seeds: list[int]
    mean_score: float | None
    mean_baseline: float | None
    states: dict[str, int]
    band: Band | None
    n_pending: int = key("runs in the cell that have not ended (not in its statistics, not 'missing')")
    pending: dict[str, int] = key("runs not yet ended, by state (queued, preparing, running, ...)")
    values: list[float] = key("the improvements of the cell's ended runs with a result, one per seed")


@section
class MatrixCell(CellStats):
    agent: str
    task: str
    level: int | None


@section
class LevelCell(CellStats):
    agent: str
    level: int
    tasks: list[str]


@section
class DriverCell(CellStats):
    agent: str
    driver: str
    task: str


@section
class RadarSeries:
    agent: str
    values: list[Any] = key(
        schema={'type': 'array', 'items': {'type': ['number', 'null'], 'minimum': 0, 'maximum': 100}})


@section
class Radar:
    axes: list[str]
    scale: str
    series: list[RadarSeries]


@section
class PassAtKValue:
    k: int
    mean: float
    n: int


@section
class PassAtK:
    agent: str
    task: str
    values: list[PassAtKValue]


@section
class GateCell:
    task: str
    mean: float | None
    noise: float | None
    n: int
    verdict: Literal["up", "flat", "regressed", "insufficient", "pending"]
    reason: str
    band: Band | None


@section
class GateCheck:
    name: str
    passed: bool
    detail: str
    verdict: Literal["pass", "fail", "insufficient", "pending"] = optional(
        "insufficient: too few seeds (or valid runs) to tell")


@section
class AgentGates:
    agent: str
    passed: bool
    cells: list[GateCell]
    gates: list[GateCheck]
    verdict: Literal["pass", "fail", "insufficient", "pending"] = optional(
        "insufficient: too few seeds (or valid runs) to tell; pending: runs of a judged cell have "
        "not ended yet")


@section
class ExcludedFlagged:
    OPEN = True
    enabled: bool
    run_ids: list[str]


@section
class EfficiencyDot:
    OPEN = True
    run_id: str
    agent: str
    task: str
    x: float
    y: float
    flagged: bool


@section
class Efficiency:
    OPEN = True
    axis: str = key(enum=['cost_usd', 'gpu_hours', 'agent_hours'])
    axis_label: str
    dots: list[EfficiencyDot]


@section
class CompareReport(Report):
    HEAD = head("compare_report", "autorl-tui comparison report",
                "Runs compared across agents, tasks, levels and driver LLMs. Improvement = "
                "runs.improvement (points, 0-100 scale); a cell's statistics are over the runs (seeds) "
                "in it that have an improvement; std is the sample standard deviation.")
    schema: str = key(schema={"const": "autorl-tui/compare-report"})
    store: str
    selection: Selection
    agents: list[str]
    tasks: list[str]
    levels: list[int]
    drivers: list[str]
    runs: list[ComparedRun]
    matrix: list[MatrixCell]
    by_level: list[LevelCell]
    by_driver: list[DriverCell]
    radar: Radar
    pass_at_k: list[PassAtK]
    gates: list[AgentGates]
    unisolated_runs: list[str] = key("runs whose agent ran unisolated (isolation: none)")
    excluded_flagged: ExcludedFlagged = key(
        "runs left out of the matrix and the gates because they carry trust flags (compare "
        "--exclude-flagged)")
    efficiency: Efficiency = key("held-out improvement against cost, one dot per run (reports/efficiency.py)")
    pending_runs: dict[str, int] = key("runs not yet ended, by state (queued, preparing, running, ...)")

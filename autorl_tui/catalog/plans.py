"""Plans: a YAML matrix (tasks x agents x models x seeds [x drivers]) expanded into run specs.
Instead of `tasks` x `models`, `cells: [{task: T, model: M}, ...]` pairs each task with its model."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from autorl_tui import registry
from autorl_tui.durations import parse_duration
from autorl_tui.catalog.grading_choice import GradingChoice, PlacementError
from autorl_tui.catalog.overlays import parse_overlays
from autorl_tui.exitcodes import UsageError

ISOLATIONS = ("sandbox", "none")
# The keys every plan may have; each executor adds its own (`Executor.plan_keys`, e.g. ray's `cluster`).
COMMON_PLAN_KEYS = {"name", "tasks", "cells", "agents", "models", "seeds", "drivers", "budget", "executor",
                    "gpus_per_run", "priority", "driver_url", "limits", "image", "token_budget",
                    "cost_budget", "description", "threads", "log_cap", "isolation", "model_mismatch",
                    "agent_overlays", "protocol", "host_ports", "grading"}
TASK_ENTRY_KEYS = {"id", "protocol"}
DEFAULT_EXECUTOR = "local"
MAX_BUDGET_S = 7 * 24 * 3600      # a longer budget is a typo (100000h), not a plan


@dataclass
class RunRequest:
    task: str
    agent: str
    model: str
    seed: int
    budget_s: float
    executor: str = DEFAULT_EXECUTOR
    isolation: str = "sandbox"   # local executor: "none" runs the agent unisolated (every report says so)
    gpus: int = 0
    driver: str | None = None
    priority: int = 0
    protocol: str | None = None      # a named protocol of the task card (None: the card's default)
    options: dict[str, Any] = field(default_factory=dict)   # driver_url, limits, image, token/cost budgets


@dataclass
class Plan:
    name: str
    source: str
    runs: list[RunRequest]
    raw: dict[str, Any]


def executor_class(name: str):
    """An executor's class, by its registered name (loaded as a plugin: the catalog imports no engine)."""
    return registry.load("executors", name)


def executor_plan_keys() -> dict[str, str]:
    """Every executor's own plan keys: {key: executor name}."""
    return {key: name for name in registry.names("executors") for key in executor_class(name).plan_keys}


def form_executors() -> list[str]:
    """The executors the console's New-plan form offers (`Executor.in_plan_form`)."""
    return [name for name in registry.names("executors") if executor_class(name).in_plan_form]


def host_slot_executors() -> set[str]:
    """The executors whose runs hold this host's slots; a cluster places the others' (`Executor.uses_host_slots`)."""
    return {name for name in registry.names("executors") if executor_class(name).uses_host_slots}


def plan_keys() -> set[str]:
    return COMMON_PLAN_KEYS | set(executor_plan_keys())


def isolation_of(req: RunRequest) -> str:
    """How a run's agent is isolated, as it is recorded (run spec `isolation`) and reported:
    `bwrap` (local sandbox), `docker`, or `none` (unisolated: the plan said `isolation: none`);
    the executor says which (`Executor.isolation_label`)."""
    return executor_class(req.executor).isolation_label(req.isolation)


def _as_list(raw: dict, key: str, where: str, default=None) -> list:
    value = raw.get(key, default)
    if value is None:
        raise UsageError(f"plan {where}: `{key}` is required (a list, e.g. {key}: [..])")
    if not isinstance(value, list):
        value = [value]
    if not value:
        raise UsageError(f"plan {where}: `{key}` must not be empty")
    return value


def _no_duplicates(values: list, key: str, where: str) -> list:
    seen, twice = set(), []
    for v in values:
        if v in seen and v not in twice:
            twice.append(v)
        seen.add(v)
    if twice:
        raise UsageError(f"plan {where}: `{key}` lists {', '.join(map(str, twice))} more than once; each "
                         f"combination runs once (add seeds for repeats)")
    return values


def _combinations(raw: dict, agents: list[str], where: str) -> list[tuple[str, str | None, str, str]]:
    """(task, protocol, agent, model) in run order: each of `cells` with every agent when given,
    else every task with every agent and every model. A task names its protocol as a `tasks:` entry
    {id, protocol} or a cell's `protocol:`; else the plan's `protocol:` (None: the card's default)."""
    default = raw.get("protocol")
    if "cells" not in raw:
        tasks = [_task_entry(t, default, where) for t in _as_list(raw, "tasks", where)]
        _no_duplicates([t if p is None else f"{t} (protocol {p})" for t, p in tasks], "tasks", where)
        models = _no_duplicates([str(m) for m in _as_list(raw, "models", where, ["tiny"])], "models", where)
        return [(t, proto, a, m) for (t, proto), a, m in itertools.product(tasks, agents, models)]
    both = [k for k in ("tasks", "models") if k in raw]
    if both:
        raise UsageError(f"plan {where}: `cells` pairs tasks with models; drop `{'` and `'.join(both)}` "
                         f"(or drop `cells` to run every task with every model)")
    fix = "e.g. cells: [{task: webshop-mini, model: tiny-webshop}, {task: arith, model: tiny, protocol: default}]"
    cells = _as_list(raw, "cells", where)
    if not all(isinstance(c, dict) and set(c) - {"protocol"} == {"task", "model"} for c in cells):
        raise UsageError(f"plan {where}: each of `cells` must be a mapping with exactly `task` and `model` "
                         f"(and optionally `protocol`); {fix}")
    cells = [(str(c["task"]), c.get("protocol", default), str(c["model"])) for c in cells]
    _no_duplicates([f"{t}/{m}" + (f"/{p}" if p else "") for t, p, m in cells], "cells", where)
    return [(t, None if p is None else str(p), a, m) for t, p, m in cells for a in agents]


def parse_plan(text: str, where: str = "<plan>") -> Plan:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"plan {where} is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise UsageError(f"plan {where} must be a mapping with tasks, agents, models, seeds, budget")
    known = plan_keys()
    unknown = sorted(set(raw) - known)
    if unknown:
        raise UsageError(f"plan {where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    agents = _no_duplicates([str(a) for a in _as_list(raw, "agents", where)], "agents", where)
    combinations = _combinations(raw, agents, where)
    seeds = _as_list(raw, "seeds", where, [0])
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise UsageError(f"plan {where}: seeds must be integers, got {seeds!r}")
    _no_duplicates(seeds, "seeds", where)
    drivers = raw.get("drivers") or [None]
    if not isinstance(drivers, list):
        drivers = [drivers]
    if "budget" not in raw:
        raise UsageError(f"plan {where}: `budget` is required (e.g. budget: 10m)")
    budget = parse_duration(raw["budget"])
    if budget > MAX_BUDGET_S:
        raise UsageError(f"plan {where}: budget {raw['budget']} is longer than the 7 days a run may take "
                         f"(a typo?); give at most 168h")
    executor = raw.get("executor", DEFAULT_EXECUTOR)
    if executor not in registry.entries("executors"):
        raise UsageError(f"plan {where}: executor {executor!r} must be one of {', '.join(registry.names('executors'))}")
    isolation = raw.get("isolation", "sandbox")
    if isolation not in ISOLATIONS:
        raise UsageError(f"plan {where}: isolation {isolation!r} must be one of {', '.join(ISOLATIONS)} "
                         f"(`none` runs local agents unisolated, as the harness user)")
    gpus = raw.get("gpus_per_run", 0)
    if not isinstance(gpus, int) or gpus < 0:
        raise UsageError(f"plan {where}: gpus_per_run must be a non-negative integer")
    priority = int(raw.get("priority", 0))
    _check_log_cap(raw.get("log_cap"), where)
    _check_executor_keys(raw, executor, where)
    if raw.get("model_mismatch", "refuse") not in ("refuse", "allow"):
        raise UsageError(f"plan {where}: model_mismatch must be refuse (the default) or allow, "
                         f"got {raw['model_mismatch']!r}")
    _check_host_ports(raw.get("host_ports"), where)
    _check_grading(raw.get("grading"), executor, where)
    options = {k: raw[k] for k in ("driver_url", "limits", "image", "token_budget", "cost_budget", "threads", "log_cap",
                                   "model_mismatch", "host_ports", "grading", *executor_class(executor).plan_keys)
               if k in raw}
    executor_class(executor).check_plan(raw, options, where)
    overlays = parse_overlays(raw.get("agent_overlays"), where, Path(where).parent)
    stray = sorted(set(overlays) - {n for a in agents for n in (a, Path(a).name)})
    if stray:
        raise UsageError(f"plan {where}: agent_overlays names {', '.join(stray)}, not an agent of this plan "
                         f"({', '.join(agents)})")

    def with_overlay(a: str) -> dict:
        ov = overlays.get(a) or overlays.get(Path(a).name)
        return dict(options, overlay=ov) if ov else dict(options)

    runs = [RunRequest(task=t, protocol=proto, agent=a, model=m, seed=s, budget_s=budget, executor=executor,
                       isolation=isolation, gpus=gpus,
                       driver=d, priority=priority, options=with_overlay(a))
            for (t, proto, a, m), d, s in itertools.product(combinations, drivers, seeds)]
    name = str(raw.get("name") or Path(where).stem)
    return Plan(name=name, source=text, runs=runs, raw=raw)


def _task_entry(entry, default_protocol, where: str) -> tuple[str, str | None]:
    """A `tasks:` entry: a task id, or {id: TASK, protocol: NAME} (a named protocol of its card;
    the plan's `protocol:` applies to entries that name none). Names are checked against the
    cards when the plan is validated."""
    if isinstance(entry, dict):
        unknown = sorted(set(entry) - TASK_ENTRY_KEYS)
        if unknown or "id" not in entry:
            raise UsageError(f"plan {where}: a task entry must be a task id or {{id: TASK, protocol: NAME}}, "
                             f"got {entry!r}")
        proto = entry.get("protocol", default_protocol)
        return str(entry["id"]), (str(proto) if proto is not None else None)
    return str(entry), (str(default_protocol) if default_protocol is not None else None)


def _check_host_ports(ports, where: str) -> None:
    """`host_ports: [8000, ...]`: the host's loopback ports a sandboxed local agent may reach (a
    local driver-LLM server); nothing else of the host's network is there (docs/security.md)."""
    if ports is None:
        return
    if not isinstance(ports, list) or not all(isinstance(p, int) and not isinstance(p, bool) and 0 < p < 65536
                                              for p in ports):
        raise UsageError(f"plan {where}: host_ports must be a list of TCP port numbers (1..65535), "
                         f"e.g. host_ports: [8000]; got {ports!r}")


def host_ports_of(options: dict) -> list[int]:
    """The host loopback ports a run's sandboxed agent may reach: the plan's `host_ports`, and the
    port of a `driver_url` on the host's loopback (the plan names that server too)."""
    from urllib.parse import urlsplit

    ports = [int(p) for p in options.get("host_ports") or []]
    url = urlsplit(str(options.get("driver_url") or ""))
    if url.hostname in ("127.0.0.1", "localhost", "::1") and url.port:
        ports.append(url.port)
    return list(dict.fromkeys(ports))


def _check_executor_keys(raw: dict, executor: str, where: str) -> None:
    """Another executor's plan keys are refused by name (`cluster` applies to executor ray only)."""
    for key, owner in sorted(executor_plan_keys().items()):
        if key in raw and owner != executor:
            raise UsageError(f"plan {where}: `{key}` applies to executor {owner} only (this plan says {executor!r})")


def _check_grading(grading, executor: str, where: str) -> None:
    """`grading: {placement: shared | pool, pool_gpus: [...], backend: auto | vllm | transformers}`
    (docs/grading.md, "GPU"); the decision's own rules check it (grading/placement.py)."""
    if grading is None:
        return
    try:
        choice = GradingChoice.from_dict(grading, f"plan {where}")
    except PlacementError as exc:
        raise UsageError(str(exc)) from None
    if choice.placement == "pool" and executor_class(executor).grades_remotely:
        raise UsageError(f"plan {where}: grading.placement pool names this machine's GPUs; a {executor} run grades "
                         f"on its cluster (docs/cluster.md): drop grading.placement or use executor local")


def _check_log_cap(cap, where: str) -> None:
    """`log_cap: {events: N, bytes: B, file_bytes: F}`: how many stdout/stderr/action events (and
    bytes of them) a run stores at most (instrument/log_ingest.py has the defaults), and how
    large each raw log file may grow on disk (executors/capped_log.py)."""
    if cap is None:
        return
    if not isinstance(cap, dict) or set(cap) - {"events", "bytes", "file_bytes"}:
        raise UsageError(f"plan {where}: log_cap must be a mapping with 'events', 'bytes' and/or 'file_bytes', "
                         f"e.g. log_cap: {{events: 100000, bytes: 67108864, file_bytes: 268435456}}; got {cap!r}")
    for key, value in cap.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"plan {where}: log_cap.{key} must be a positive whole number, got {value!r}")


def load_plan(path: str | Path) -> Plan:
    p = Path(path)
    if not p.exists():
        raise UsageError(f"plan file {p} does not exist")
    plan = parse_plan(p.read_text(), str(p))
    for run in plan.runs:   # an agent folder's path (AutoRL-Bench style) may be relative to the plan
        given = Path(run.agent)
        if "/" in run.agent and not given.is_absolute() and not given.exists() and (p.parent / given).exists():
            run.agent = str((p.parent / given).resolve())
    return plan

"""Plans: a YAML matrix (tasks x agents x models x seeds [x drivers]) expanded into run specs."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from autorl_tui import registry
from autorl_tui.durations import parse_duration
from autorl_tui.exitcodes import UsageError

PLAN_KEYS = {"name", "tasks", "agents", "models", "seeds", "drivers", "budget", "executor",
             "gpus_per_run", "priority", "driver_url", "limits", "image", "token_budget",
             "cost_budget", "description", "threads"}


@dataclass
class RunRequest:
    task: str
    agent: str
    model: str
    seed: int
    budget_s: float
    executor: str = "local"
    gpus: int = 0
    driver: str | None = None
    priority: int = 0
    options: dict[str, Any] = field(default_factory=dict)   # driver_url, limits, image, token/cost budgets


@dataclass
class Plan:
    name: str
    source: str
    runs: list[RunRequest]
    raw: dict[str, Any]


def _as_list(raw: dict, key: str, where: str, default=None) -> list:
    value = raw.get(key, default)
    if value is None:
        raise UsageError(f"plan {where}: `{key}` is required (a list, e.g. {key}: [..])")
    if not isinstance(value, list):
        value = [value]
    if not value:
        raise UsageError(f"plan {where}: `{key}` must not be empty")
    return value


def parse_plan(text: str, where: str = "<plan>") -> Plan:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"plan {where} is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise UsageError(f"plan {where} must be a mapping with tasks, agents, models, seeds, budget")
    unknown = sorted(set(raw) - PLAN_KEYS)
    if unknown:
        raise UsageError(f"plan {where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(PLAN_KEYS))}")
    tasks = [str(t) for t in _as_list(raw, "tasks", where)]
    agents = [str(a) for a in _as_list(raw, "agents", where)]
    models = [str(m) for m in _as_list(raw, "models", where, ["tiny"])]
    seeds = _as_list(raw, "seeds", where, [0])
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise UsageError(f"plan {where}: seeds must be integers, got {seeds!r}")
    drivers = raw.get("drivers") or [None]
    if not isinstance(drivers, list):
        drivers = [drivers]
    if "budget" not in raw:
        raise UsageError(f"plan {where}: `budget` is required (e.g. budget: 10m)")
    budget = parse_duration(raw["budget"])
    executor = raw.get("executor", "local")
    if executor not in registry.entries("executors"):
        raise UsageError(f"plan {where}: executor {executor!r} must be one of {', '.join(registry.names('executors'))}")
    gpus = raw.get("gpus_per_run", 0)
    if not isinstance(gpus, int) or gpus < 0:
        raise UsageError(f"plan {where}: gpus_per_run must be a non-negative integer")
    priority = int(raw.get("priority", 0))
    options = {k: raw[k] for k in ("driver_url", "limits", "image", "token_budget", "cost_budget", "threads")
               if k in raw}
    runs = [RunRequest(task=t, agent=a, model=m, seed=s, budget_s=budget, executor=executor, gpus=gpus,
                       driver=d, priority=priority, options=dict(options))
            for t, a, m, d, s in itertools.product(tasks, agents, models, drivers, seeds)]
    name = str(raw.get("name") or Path(where).stem)
    return Plan(name=name, source=text, runs=runs, raw=raw)


def load_plan(path: str | Path) -> Plan:
    p = Path(path)
    if not p.exists():
        raise UsageError(f"plan file {p} does not exist")
    return parse_plan(p.read_text(), str(p))

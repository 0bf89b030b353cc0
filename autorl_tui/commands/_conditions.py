"""Under which conditions a run's scores were obtained: the budget is wall-clock, so a loaded
machine gives the agent less CPU and it trains fewer steps. `demo` prints this with its summary."""

from __future__ import annotations

import json
import os
import re

_RUNNING = re.compile(r"running \S+ code/(\w+)\.py .*?--steps (\d+)")


def training_steps(stdout_lines: list[str]) -> list[dict]:
    """Training stages seen in an agent's stdout: the steps asked for (`running ... --steps N`) and
    done (a `{"stage": ..., "steps": n, "stopped_early": ...}` summary line), in order."""
    stages, asked = [], None
    for line in stdout_lines:
        m = _RUNNING.search(line)
        if m:
            asked = int(m.group(2))
            continue
        if line.startswith("{") and '"stage"' in line:
            try:
                s = json.loads(line)
            except ValueError:
                continue
            if "steps" in s:
                stages.append({"stage": s["stage"], "steps": s["steps"], "asked": asked,
                               "stopped_early": bool(s.get("stopped_early"))})
            asked = None
    return stages


def run_conditions(reader, run_id: str, cores: int | None = None) -> dict:
    """`reader`: a store.queries.StoreReader."""
    cores = cores or os.cpu_count() or 1
    cpu = reader.cpu_usage(run_id)
    lines = reader.output_lines(run_id, "stdout")
    budget_stops = [line for line in lines if ("stopping:" in line and " left" in line)
                    or "not enough budget" in line or "overran its time" in line]
    share = None if cpu.mean_percent is None else cpu.mean_percent / 100.0
    return {"cores": cores, "agent_cores": share, "samples": cpu.samples, "stages": training_steps(lines),
            "budget_stops": budget_stops, "load": os.getloadavg()[0]}


def describe_conditions(run_id: str, c: dict) -> list[str]:
    out = []
    if c["agent_cores"] is not None:
        out.append(f"{run_id}: the agent used {c['agent_cores']:.2f} of {c['cores']} CPU core(s) on average "
                   f"({100 * c['agent_cores'] / c['cores']:.0f}%, {c['samples']} samples); "
                   f"load average now {c['load']:.1f}")
    if c["stages"]:
        parts = []
        for s in c["stages"]:
            cut = s["stopped_early"] or (s["asked"] is not None and s["steps"] < s["asked"])
            steps = f"{s['steps']}/{s['asked']}" if s["asked"] is not None else str(s["steps"])
            parts.append(f"{s['stage']} {steps} steps" + (" (cut by the budget)" if cut else ""))
        out.append(f"{run_id}: training: " + ", ".join(parts))
    for line in c["budget_stops"][:3]:
        out.append(f"{run_id}: agent: {line.strip()}")
    busy = c["load"] > c["cores"] or (c["agent_cores"] is not None and c["agent_cores"] < 0.5 * c["cores"])
    cut = any(s["stopped_early"] or (s["asked"] is not None and s["steps"] < s["asked"]) for s in c["stages"])
    if busy or cut:
        out.append(f"{run_id}: the budget is wall-clock: on a busy machine the agent trains less and scores "
                   f"lower than the README's figures (measured at load average < 2)")
    return out

"""The comparison report: agents × tasks across seeds, per level, per driver LLM, a radar across
tasks, pass@1 vs pass@k, and release gates. Built from `run_summary` rows only, so every number is
a plain aggregate of store columns (runs.improvement, runs.test_score, submissions.metrics)."""

from __future__ import annotations

import math
import re
import statistics
import time

from autorl_tui import __version__
from autorl_tui.store.isolation import recorded_exposures, recorded_isolation
from autorl_tui.exitcodes import UsageError
from autorl_tui.reports import efficiency, svg, trust
from autorl_tui.reports.bootstrap import band_verdict, paired_band
from autorl_tui.reports.analytics import Analytics, _decode_json
from autorl_tui.reports.render import render
from autorl_tui.reports.run_report import clean
from autorl_tui.reports.sections_compare import CompareReport
from autorl_tui.reports.typed_json import checked
from autorl_tui.run_states import FINAL_STATES as FINAL

SCHEMA_ID = "autorl-tui/compare-report"
SCHEMA_VERSION = 1
PASS_AT = re.compile(r"^pass@(\d+)$")


def describe(values: list[float]) -> dict:
    """mean, sample std, standard error, min, max and spread (max − min) of a cell's values."""
    n = len(values)
    if not n:
        return {"n": 0, "mean": None, "std": None, "stderr": None, "min": None, "max": None, "spread": None}
    std = statistics.stdev(values) if n > 1 else None
    return {"n": n, "mean": statistics.fmean(values), "std": std,
            "stderr": std / math.sqrt(n) if std is not None else None,
            "min": min(values), "max": max(values), "spread": max(values) - min(values)}


def noise_of(d: dict) -> float | None:
    """Seed noise of a cell: the larger of 2 × standard error and the max–min spread over seeds."""
    if d["n"] < 2:
        return None
    return max(2 * d["stderr"], d["spread"])


def final_score(run: dict) -> float | None:
    return run["test_score"] if run["test_score"] is not None else run["best_dev_score"]


def build_compare_report(a: Analytics, ids: list[str] | None = None, plan: str | list[str] | None = None,
                         primary_task: str | None = None, exclude_flagged: bool = False) -> dict:
    """`plan`: one plan's name, or several (their runs side by side, each run once).
    exclude_flagged: runs with trust flags (reports/trust.py) stay in the run list, marked, and
    are left out of the matrix, the gates and every aggregate; the report names them."""
    if not ids and not plan:
        raise UsageError("compare needs RUN_ID... or --plan NAME")
    plans = [plan] if isinstance(plan, str) else list(plan or [])
    if plans:
        listed = list({r["run_id"]: r for p in plans for r in a.runs(plan=p)}.values())
        plan = " + ".join(plans)
    else:
        listed = a.runs(ids=ids)
    trust_of = {rid: trust.summary(f) for rid, f in trust.findings_by_run(a, [r["run_id"] for r in listed]).items()}
    costs = a.costs(listed)
    cost_of = {r["run_id"]: trust.cost_per_point(costs[r["run_id"]], r["improvement"]) for r in listed}
    excluded = [r["run_id"] for r in listed if exclude_flagged and trust_of[r["run_id"]]["flagged"]]
    runs = [r for r in listed if r["run_id"] not in excluded]
    agents = sorted({r["agent"] for r in runs})
    tasks = sorted({r["task"] for r in runs})
    if primary_task and primary_task not in tasks:
        raise UsageError(f"--primary-task {primary_task!r} is not among the compared tasks: {', '.join(tasks)}")
    best_metrics = {r["run_id"]: r["metrics"] for r in a.query("best_submission_metrics",
                                                                 ids="\x1f".join(x["run_id"] for x in runs))}
    bands = {rid: paired_band(pairs) for rid, pairs in a.held_out_pairs([r["run_id"] for r in runs]).items()}

    def cell(group: list[dict]) -> dict:
        # Runs still queued or under way count apart: they have no result yet, not "no result".
        pending = [r for r in group if r["state"] not in FINAL]
        ended = [r for r in group if r["state"] in FINAL]
        valid = [r for r in ended if r["improvement"] is not None]
        d = describe([r["improvement"] for r in valid])
        scores = [final_score(r) for r in ended if final_score(r) is not None]
        return {**d, "n_runs": len(group), "n_missing": len(ended) - len(valid), "n_pending": len(pending),
                "pending": _count(r["state"] for r in pending), "values": [r["improvement"] for r in valid],
                "run_ids": [r["run_id"] for r in group], "seeds": sorted({r["seed"] for r in group}),
                "mean_score": statistics.fmean(scores) if scores else None,
                "mean_baseline": _mean([r["baseline_score"] for r in group]),
                "states": _count(r["state"] for r in group),
                # one seed: the held-out questions' own spread is the only noise there is to show
                "band": bands.get(valid[0]["run_id"]) if len(valid) == 1 else None}

    matrix = []
    for agent in agents:
        for task in tasks:
            group = [r for r in runs if r["agent"] == agent and r["task"] == task]
            if group:
                matrix.append({"agent": agent, "task": task, "level": group[0]["level"], **cell(group)})

    levels = sorted({r["level"] for r in runs if r["level"] is not None})
    by_level = []
    for agent in agents:
        for level in levels:
            group = [r for r in runs if r["agent"] == agent and r["level"] == level]
            if group:
                by_level.append({"agent": agent, "level": level, "tasks": sorted({r["task"] for r in group}),
                                 **cell(group)})

    drivers = sorted({r["driver"] or "(none)" for r in runs})
    by_driver = []
    if len(drivers) > 1:
        for agent in agents:
            for driver in drivers:
                for task in tasks:
                    group = [r for r in runs if r["agent"] == agent and (r["driver"] or "(none)") == driver
                             and r["task"] == task]
                    if group:
                        by_driver.append({"agent": agent, "driver": driver, "task": task, **cell(group)})

    radar = {"axes": tasks, "scale": "mean final score (held-out test, else best dev), 0-100, higher is better",
             "series": [{"agent": agent,
                         "values": [_clamp(next((c["mean_score"] for c in matrix
                                                 if c["agent"] == agent and c["task"] == t), None)) for t in tasks]}
                        for agent in agents]}

    pass_at_k = []
    for c in matrix:
        ks: dict[int, list[float]] = {}
        for rid in c["run_ids"]:
            m = _decode_json(best_metrics.get(rid))
            for key, value in m.items() if isinstance(m, dict) else ():
                match = PASS_AT.match(str(key))
                if match and isinstance(value, (int, float)):
                    ks.setdefault(int(match.group(1)), []).append(float(value))
        if ks:
            pass_at_k.append({"agent": c["agent"], "task": c["task"],
                              "values": [{"k": k, "mean": statistics.fmean(v), "n": len(v)} for k, v in sorted(ks.items())]})

    gates = _gates(matrix, agents, tasks, primary_task)
    report = {
        "schema": SCHEMA_ID, "schema_version": SCHEMA_VERSION, "generator": f"autorl-tui {__version__}",
        "generated_at": time.time(), "store": str(a.store_path),
        "selection": {"plan": plan, "run_ids": [r["run_id"] for r in runs], "primary_task": primary_task},
        "agents": agents, "tasks": tasks, "levels": levels, "drivers": drivers,
        "runs": [{k: r[k] for k in ("run_id", "task", "level", "agent", "driver", "model", "seed", "state",
                                    "baseline_score", "baseline_dev_score", "best_dev_score", "test_score",
                                    "improvement", "n_submissions", "n_dropped", "wall_s", "imported_from")}
                 | {"isolation": recorded_isolation(r.get("spec"), r.get("executor")),
                    "exposures": recorded_exposures(r.get("spec")),
                    "held_out_band": bands.get(r["run_id"]), "trust": trust_of[r["run_id"]],
                    "cost_per_point": cost_of[r["run_id"]]} for r in listed],
        "excluded_flagged": {"enabled": exclude_flagged, "run_ids": excluded},
        "efficiency": None,
        "matrix": matrix, "by_level": by_level, "by_driver": by_driver, "radar": radar,
        "pass_at_k": pass_at_k, "gates": gates,
        "unisolated_runs": [r["run_id"] for r in runs if recorded_isolation(r.get("spec"), r.get("executor")) == "none"],
        "pending_runs": _count(r["state"] for r in runs if r["state"] not in FINAL),
    }
    report["efficiency"] = efficiency.efficiency(report["runs"])
    return checked(CompareReport, clean(report))


def _gates(matrix: list[dict], agents: list[str], tasks: list[str], primary_task: str | None) -> list[dict]:
    """Release gates per agent. Per cell: noise = max(2 × stderr, max−min over seeds) (needs ≥ 2
    seeds); `up` when the mean improvement exceeds the noise, `regressed` when it is below −noise.
    With one seed the cell's paired bootstrap band over the held-out questions decides instead
    (`up` when the band is above 0), provided it measures the improvement itself (the primary
    metric is the per-question accuracy).
    An agent passes when its primary task (or, without --primary-task, at least one task) is up
    beyond noise and no other task regressed beyond noise."""
    out = []
    for agent in agents:
        cells = {c["task"]: c for c in matrix if c["agent"] == agent}
        rows = []
        for task in tasks:
            c = cells.get(task)
            if c is None:
                continue
            noise = noise_of(c)
            band = c.get("band")
            if c["n_pending"]:
                verdict = "pending"
                why = (f"{c['n_pending']} run(s) not finished ({_states_text(c['pending'])}): "
                       f"judged when they have ended")
            elif noise is None and band is not None and _band_measures(band, c["mean"]):
                verdict, why = band_verdict(band)
            elif noise is None or c["mean"] is None:
                verdict = "insufficient"
                why = f"{c['n']} valid run(s); noise needs at least 2 seeds"
                if band is not None:
                    why += " (the held-out bootstrap band is over per-question accuracy, not this primary metric)"
            elif c["mean"] > noise:
                verdict, why = "up", f"mean {c['mean']:+.2f} > noise {noise:.2f}"
            elif c["mean"] < -noise:
                verdict, why = "regressed", f"mean {c['mean']:+.2f} < −noise {noise:.2f}"
            else:
                verdict, why = "flat", f"|mean {c['mean']:+.2f}| within noise {noise:.2f}"
            rows.append({"task": task, "mean": c["mean"], "noise": noise, "n": c["n"], "verdict": verdict,
                         "reason": why, "band": band})
        primary_rows = [r for r in rows if r["task"] == primary_task] if primary_task else rows
        others = [r for r in rows if r["task"] != primary_task] if primary_task else rows
        primary_ok = any(r["verdict"] == "up" for r in primary_rows)
        regressions = [r["task"] for r in others if r["verdict"] == "regressed"]
        insufficient = [r["task"] for r in rows if r["verdict"] == "insufficient"]
        # one seed (or failed runs) cannot tell: such a gate is "insufficient", never a FAIL; runs
        # not yet ended leave it "pending"
        primary_verdict = "pass" if primary_ok else \
            "pending" if any(r["verdict"] == "pending" for r in primary_rows) else \
            "insufficient" if any(r["verdict"] == "insufficient" for r in primary_rows) else "fail"
        others_insufficient = [r["task"] for r in others if r["verdict"] == "insufficient"]
        others_pending = [r["task"] for r in others if r["verdict"] == "pending"]
        regress_verdict = "fail" if regressions else "pending" if others_pending else \
            "insufficient" if others_insufficient else "pass"
        gate_primary = {"name": "primary metric up beyond noise (seed band, or the bootstrap band of one seed)",
                        "passed": primary_ok, "verdict": primary_verdict,
                        "detail": (f"{primary_task}: " if primary_task else "any task: ")
                        + ("; ".join(f"{r['task']} {r['verdict']}" for r in primary_rows) or "no runs")}
        gate_regress = {"name": "no regression beyond noise on the other tasks",
                        "passed": not regressions, "verdict": regress_verdict,
                        "detail": ("regressed: " + ", ".join(regressions)) if regressions else
                        ("not ended yet: " + ", ".join(others_pending)) if others_pending else
                        ("no other tasks" if not others else "none regressed")
                        + (f" (insufficient seeds: {', '.join(insufficient)})" if insufficient else "")}
        verdicts = (primary_verdict, regress_verdict)
        out.append({"agent": agent, "cells": rows, "gates": [gate_primary, gate_regress],
                    "passed": gate_primary["passed"] and gate_regress["passed"],
                    "verdict": "fail" if "fail" in verdicts else "pending" if "pending" in verdicts
                    else "insufficient" if "insufficient" in verdicts else "pass"})
    return out


def _band_measures(band: dict, improvement: float | None) -> bool:
    """The band is about the run's improvement: its observed change is the improvement (the task's
    primary metric is the held-out accuracy in points)."""
    return improvement is not None and abs(band["observed"] - improvement) <= 1e-6 * max(1.0, abs(improvement))


def _mean(values):
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def _clamp(v):
    return None if v is None else max(0.0, min(100.0, v))


def _states_text(counts: dict) -> str:
    return ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))


def _count(values) -> dict:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def render_compare_html(report: dict) -> str:
    radar_svg = svg.radar(report["radar"]["axes"],
                          [{"label": s["agent"], "values": s["values"]} for s in report["radar"]["series"]])
    cells = {(c["agent"], c["task"]): c for c in report["matrix"]}
    seeds_svg = svg.interval_plot([{"label": f"{c['agent']} · {c['task']}", "values": c["values"], "mean": c["mean"],
                                    "noise": noise_of(c)} for c in report["matrix"] if c["values"]])
    efficiency_svg = efficiency.scatter_svg(report["efficiency"])
    return render("compare.html.j2", {"r": report, "radar_svg": radar_svg, "cells": cells, "seeds_svg": seeds_svg,
                                      "pending_text": _states_text(report["pending_runs"]),
                                      "efficiency_svg": efficiency_svg})

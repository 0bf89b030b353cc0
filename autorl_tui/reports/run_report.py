"""The run report (a "rollout card"): one JSON document built from the analytics layer, and the
HTML rendered from it (plus inline SVG charts that are not part of the JSON)."""

from __future__ import annotations

import math
import time
from typing import Any

from autorl_tui import __version__
from autorl_tui.scores import FAILURE_KINDS
from autorl_tui.interop import autorl_bench_metrics
from autorl_tui.reports import svg, trust
from autorl_tui.reports.series_order import informative_rank, is_constant
from autorl_tui.reports.analytics import PHASES, Analytics, _decode_json
from autorl_tui.reports.bootstrap import paired_band
from autorl_tui.store.isolation import recorded_exposures, recorded_isolation
from autorl_tui.store.run_spec import RunSpec
from autorl_tui.reports.diffs import diff_manifests, files_run
from autorl_tui.reports.render import render
from autorl_tui.reports.sections_run import RunReport
from autorl_tui.reports.typed_json import checked

SCHEMA_ID = "autorl-tui/run-report"
SCHEMA_VERSION = 1

# How much of a long run goes into the report (the rest is counted, never silently dropped).
LIMITS = {"metric_points": 300, "log_head": 60, "log_tail": 30, "log_chars": 300, "badcases_per_kind": 5,
          "badcase_chars": 600, "diff_lines_per_file": 200, "diff_lines_per_submission": 600,
          "charts": 12}

RUN_FIELDS = ("run_id", "plan_name", "task", "level", "agent", "model", "driver", "seed", "budget_s", "executor",
              "gpus_requested", "state", "failure_source", "end_reason", "created_at", "started_at", "deadline",
              "ended_at", "current_attempt")


_PLAIN = (str, int, bool, type(None))


def clean(value: Any) -> Any:
    """JSON-safe: non-finite floats become None, tuples become lists. (Exact types are tested first:
    a 10,000-run compare holds half a million values.)"""
    kind = type(value)
    if kind is dict:
        return {k if type(k) is str else str(k): v if type(v) in _PLAIN else clean(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [v if type(v) in _PLAIN else clean(v) for v in value]
    if kind in _PLAIN:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return None
    return value


def protocol_of(spec: RunSpec) -> dict:
    task = spec.task
    proto = spec.protocol or task.get("protocol") or {}
    splits = list(((task.get("data") or {}).get("splits") or {}).keys()) or spec.extra.get("splits") or []
    return {"temperature": proto.get("temperature"), "top_p": proto.get("top_p"), "n": proto.get("n"),
            "max_tokens": proto.get("max_tokens"), "max_steps": proto.get("max_steps"),
            "k": proto.get("k"), "splits": splits, "scorer": task.get("scorer"),
            "primary_metric": task.get("primary_metric"),
            "name": spec.protocol_name or task.get("protocol_name") or "default",
            "about": task.get("protocol_about") or None,
            "data_origin": spec.data_origin or task.get("data_origin")}


def build_run_report(a: Analytics, run_id: str) -> dict:
    run = a.run(run_id)
    spec = RunSpec.from_dict(run["spec"])
    subs = a.submissions(run_id)
    best = next((s for s in subs if s["submission_id"] == run["best_submission_id"]), None)
    phases = a.phases(run_id)
    agent_s = a.agent_time(run)
    stats = a.metric_stats(run_id)
    checks = a.danger_signals(run_id, stats)
    series = a.metric_series(run_id, LIMITS["metric_points"], t0=run["started_at"] or run["created_at"])
    report = {
        "schema": SCHEMA_ID, "schema_version": SCHEMA_VERSION, "generator": f"autorl-tui {__version__}",
        "generated_at": time.time(), "store": str(a.store_path),
        "run": {**{k: run[k] for k in RUN_FIELDS}, "isolation": recorded_isolation(spec, run["executor"]),
                "exposures": recorded_exposures(spec)},
        "protocol": protocol_of(spec),
        "attempts": a.attempts(run_id),
        "model_path": spec.model_path,
        "outcome": {
            "baseline_dev_score": run["baseline_dev_score"], "baseline_score": run["baseline_score"],
            "best_dev_score": run["best_dev_score"],
            "test_score": run["test_score"], "improvement": run["improvement"],
            "dev_improvement": run["dev_improvement"], "best_submission_id": run["best_submission_id"],
            "best_submission_seq": best["seq"] if best else None, "state": run["state"],
            "end_reason": run["end_reason"], "failure_source": run["failure_source"],
            "imported_from": run["imported_from"],
            "held_out_band": paired_band(a.held_out_pairs([run_id]).get(run_id, [])),
            "cause": _failure_cause(a, run),
        },
        # AutoRL-Bench's ten run diagnostics, computed as its code does (interop/autorl_bench_metrics.py)
        "autorl_bench": autorl_bench_metrics.for_run({**run, "spec": spec.to_dict()}, subs),
        "timeline": {
            "n_submissions": run["n_submissions"], "n_scored": run["n_scored"], "n_dropped": run["n_dropped"],
            "time_to_first_valid_s": run["time_to_first_valid_s"], "time_to_best_s": run["time_to_best_s"],
            "wall_s": run["wall_s"], "agent_s": agent_s,
            "budget_used": (agent_s / run["budget_s"]) if agent_s is not None and run["budget_s"] else None,
            "submissions": [{k: s[k] for k in ("submission_id", "seq", "status", "score", "improvement", "test_score",
                                                "t_s", "latency_s", "inference_s", "grading_s", "best_so_far",
                                                "is_best", "error", "revision_id", "path", "metrics")}
                            for s in subs],
        },
        "phases": phases,
        "metrics": {"series": series, "stats": stats, "checks": checks, "sessions": a.training_sessions(run_id),
                    "n_series": len(series), "max_points_per_series": LIMITS["metric_points"]},
        "revisions": _revisions(a, run_id, subs),
        "events": _events(a, run_id),
        "samples": _samples(a, run_id, best or next((s for s in reversed(subs) if s["status"] == "scored"), None)),
        "drops": a.drops(run_id),
        "cost": a.cost(run_id),
        "trust": trust.run_trust(a, run_id),
        "limits": LIMITS,
    }
    report["cost_per_point"] = trust.cost_per_point(report["cost"], run["improvement"])
    for d in report["drops"]:
        d.pop("run_id", None)
    return checked(RunReport, clean(report))


def _revisions(a: Analytics, run_id: str, subs: list[dict]) -> dict:
    """Each submission's code against the previous submission's (the first against the first
    snapshot). A submission of the same code as the one before says so instead of repeating it;
    files the submitted pipeline ran are listed first, so the diff budget goes to them."""
    revs = a.revisions(run_id)
    by_id = {r["id"]: r for r in revs}
    wanted = {by_id[s["revision_id"]]["id"] for s in subs if s["revision_id"] in by_id}
    if revs:
        wanted.add(revs[0]["id"])
    cache = a.blobs([sha for rid in wanted for sha in by_id[rid]["manifest"].values()])
    fetch = cache.get
    commands = a.commands(run_id)

    out = []
    prev = revs[0] if revs else None
    prev_label = f"revision {prev['seq']} (first snapshot)" if prev else None
    prev_submitted = None          # the revision of the previous submission that had one
    for s in subs:
        rev = by_id.get(s["revision_id"])
        if rev is None:
            out.append({"submission_seq": s["seq"], "status": s["status"], "revision_seq": None,
                        "base": None, "files": [], "lines_added": 0, "lines_removed": 0, "truncated": False,
                        "n_files": None, "skipped": [], "unchanged": False})
            continue
        if rev is prev_submitted:
            out.append({"submission_seq": s["seq"], "status": s["status"], "revision_seq": rev["seq"],
                        "base": prev_label, "n_files": rev["n_files"], "total_bytes": rev["total_bytes"],
                        "skipped": rev["skipped"], "files": [], "lines_added": 0, "lines_removed": 0,
                        "truncated": False, "unchanged": True})
            prev_label = f"submission #{s['seq']} (revision {rev['seq']})"
            continue
        ran = files_run([c["message"] for c in commands if s["received_at"] is None or c["ts"] <= s["received_at"]],
                        rev["manifest"].keys())
        d = diff_manifests(prev["manifest"] if prev and prev is not rev else {}, rev["manifest"], fetch,
                           max_lines_per_file=LIMITS["diff_lines_per_file"],
                           max_lines_total=LIMITS["diff_lines_per_submission"], first=ran)
        out.append({"submission_seq": s["seq"], "status": s["status"], "revision_seq": rev["seq"],
                    "base": prev_label if prev is not rev else None, "n_files": rev["n_files"],
                    "total_bytes": rev["total_bytes"], "skipped": rev["skipped"], "unchanged": False, **d})
        prev, prev_label, prev_submitted = rev, f"submission #{s['seq']} (revision {rev['seq']})", rev
    return {"n_revisions": len(revs), "n_change": sum(1 for r in revs if r["reason"] == "change"),
            "by_submission": out}


def _events(a: Analytics, run_id: str) -> dict:
    counts = a.event_counts(run_id)
    rows = a.action_log(run_id, head=LIMITS["log_head"], tail=LIMITS["log_tail"], chars=LIMITS["log_chars"])
    sections: dict[str, dict] = {c["category"]: {"category": c["category"], "n": c["n"], "entries": []} for c in counts}
    for r in rows:
        sec = sections[r["category"]]
        if sec["entries"] and r["rn"] - sec["entries"][-1]["rn"] > 1:
            sec["entries"].append({"gap": r["rn"] - sec["entries"][-1]["rn"] - 1, "rn": r["rn"] - 1})
        sec["entries"].append({k: r[k] for k in ("id", "t_s", "level", "message", "message_len", "detail", "rn")})
    order = sorted(sections.values(), key=lambda s: (not s["category"].startswith("action:"), s["category"]))
    for s in order:
        s["shown"] = sum(1 for e in s["entries"] if "gap" not in e)
        s["omitted"] = s["n"] - s["shown"]
    total = sum(c["n"] for c in counts)
    return {"total": total, "shown": sum(s["shown"] for s in order), "sections": order}


def _samples(a: Analytics, run_id: str, sub: dict | None) -> dict:
    if sub is None:
        return {"submission_id": None, "submission_seq": None, "n": 0, "counts": [], "badcases": [],
                "versus_baseline": None, "baseline_id": None}
    counts = a.failure_counts(sub["submission_id"])
    examples = a.badcases(sub["submission_id"], LIMITS["badcases_per_kind"], LIMITS["badcase_chars"])
    groups = []
    order = list(FAILURE_KINDS) + sorted({c["kind"] for c in counts} - set(FAILURE_KINDS) - {"correct"})
    for kind in order:
        n = next((c["n"] for c in counts if c["kind"] == kind), 0)
        if n:
            groups.append({"kind": kind, "n": n, "examples": [e for e in examples if e["failure_kind"] == kind]})
    base = a.baseline_for_run(run_id)
    vs = a.versus_baseline(sub["submission_id"], base["id"]) if base else None
    return {"submission_id": sub["submission_id"], "submission_seq": sub["seq"],
            "n": sum(c["n"] for c in counts), "counts": counts, "badcases": groups,
            "baseline_id": base["id"] if base else None, "versus_baseline": vs}


# ---------------------------------------------------------------------------- HTML
def _failure_cause(a: Analytics, run: dict) -> dict | None:
    """For a failed or lost run, what the operator needs beside its outcome: the newest error
    events (a traceback when the harness recorded one) and the agent's last stderr lines."""
    if run["state"] not in ("failed", "lost"):
        return None
    t0 = run["started_at"] or run["created_at"]
    errors = []
    for e in reversed(a.query("failure_cause_errors", run_id=run["run_id"], t0=t0)):
        data = _decode_json(e.pop("data"))
        errors.append({**e, "traceback": data.get("traceback") if isinstance(data, dict) else None})
    stderr = [r["message"] for r in reversed(a.query("failure_cause_stderr", run_id=run["run_id"], n=12))]
    return {"errors": errors, "stderr_tail": stderr}


def session_label(s: dict) -> str:
    seq = s.get("session", s.get("session_seq"))
    kind = s.get("session_kind")
    if seq is None:
        return s.get("name") or "series"
    return f"session {seq}" + (f" ({kind})" if kind and kind != "unknown" else "")


def metric_chart_order(series: list[dict], first: set[str] = frozenset()) -> tuple[list, list, dict]:
    """(charted, constant, aliases): the series grouped by name, one chart each with one line per training
    session; flagged names first, then the informative ones (loss, reward, kl, entropy, grad_norm,
    learning_rate, mean length), then the rest by name. A name whose values never change in any
    session, or that has one point per session (a summary such as train_runtime), is listed in
    `constant` ({name, value or values, n_points}) instead of charted. A name whose points equal
    another's in every session (TRL's `reward` and `rewards/<fn>/mean` with one reward function) is
    charted once, the other name given as its alias."""
    groups: dict[str, list[dict]] = {}
    for s in series:
        groups.setdefault(s["name"], []).append(s)
    seen: dict[tuple, str] = {}
    aliases: dict[str, list[str]] = {}
    for name in sorted(groups, key=lambda n: (informative_rank(n), len(n), n)):
        key = tuple((session_label(s), tuple((p.get("step"), p["mean"]) for p in s["points"]))
                    for s in groups[name])
        if any(s["points"] for s in groups[name]) and key in seen:
            aliases.setdefault(seen[key], []).append(name)
        else:
            seen.setdefault(key, name)
    for dup in (n for names in aliases.values() for n in names):
        groups.pop(dup)
    charted, constant = [], []
    for name, group in groups.items():
        values = {v for s in group for p in s["points"] for v in (p["min"], p["max"]) if v is not None}
        if all(s["n_points"] <= 1 for s in group) and not is_constant(values):
            constant.append({"name": name, "value": None, "n_points": sum(s["n_points"] for s in group),
                             "values": [{"session": session_label(s), "value": s["points"][0]["mean"]}
                                        for s in group if s["points"]],
                             "sessions": [session_label(s) for s in group]})
            continue
        if is_constant(values) and not any(s["n_nan"] or s["n_inf"] for s in group):
            constant.append({"name": name, "value": next(iter(values), None), "n_points": sum(s["n_points"] for s in group),
                             "sessions": [session_label(s) for s in group]})
        else:
            charted.append((name, group))
    charted.sort(key=lambda g: (g[0] not in first, informative_rank(g[0]), g[0]))
    constant.sort(key=lambda c: c["name"])
    for c in constant:
        c["aliases"] = aliases.get(c["name"], [])
        c.setdefault("values", [])          # per session, for one-point series only
    return charted, constant, aliases


def charts_for(report: dict) -> dict:
    t = report["timeline"]
    charts = {"timeline": svg.score_timeline(t["submissions"], baseline=report["outcome"]["baseline_dev_score"],
                                             budget_s=report["run"]["budget_s"]),
              "phases": svg.phase_band(report["phases"]["segments"], report["phases"]["span_s"] or 0),
              "metrics": []}
    flagged = {c["series"]: c for c in report["metrics"]["checks"] if c["status"] == "flagged" and c["series"]}
    bad_series = {e["series"] for c in report["metrics"]["checks"] if c["signal"] == "non_finite" for e in c["evidence"]}
    charted, constant, aliases = metric_chart_order(report["metrics"]["series"], set(flagged) | bad_series)
    charts["constant"] = constant
    for name, group in charted[:LIMITS["charts"]]:
        xkey = "step" if all(s["x_axis"] == "step" for s in group) else "t_s"
        lines, markers = [], []
        check = flagged.get(name)
        for s in group:
            pts = [(p[xkey], p["mean"]) for p in s["points"]]
            band = [(p[xkey], p["min"], p["max"]) for p in s["points"]] if s["downsampled"] else []
            lines.append({"label": session_label(s), "points": pts, "band": band})
            for p in s["points"]:
                if p["n_bad"]:
                    markers.append({"x": p[xkey], "label": "NaN/inf", "color": "#b91c1c"})
                    break
        if check and check["signal"] == "kl_spike" and xkey == "step":
            markers += [{"x": ev["step"], "label": f"KL spike ({session_label(ev)})"}
                        for ev in check["evidence"] if ev.get("flagged", True)]
        charts["metrics"].append({
            "name": name, "aliases": aliases.get(name, []),
            "source": ", ".join(sorted({x for s in group for x in s["source"].split(",")})),
            "n_points": sum(s["n_points"] for s in group), "downsampled": any(s["downsampled"] for s in group),
            "sessions": [session_label(s) for s in group],
            "flag": check["title"] if check else ("NaN / inf values" if name in bad_series else None),
            "svg": svg.line_chart(lines, x_label="step" if xkey == "step" else "seconds since start", markers=markers,
                                  title=name)})
    charts["metrics_omitted"] = max(0, len(charted) - LIMITS["charts"])
    reward = next((c for c in report["metrics"]["checks"] if c["signal"] == "reward_up_dev_down" and c.get("windows")), None)
    charts["reward_vs_dev"] = svg.dual_chart(
        {"label": "dev score", "color": "#2563eb", "points": [(w["t_s"], w["score"]) for w in reward["windows"]]},
        {"label": f"mean {reward['series']} since previous submission", "axis": reward["series"], "color": "#ea580c",
         "points": [(w["t_s"], w["reward_mean"]) for w in reward["windows"]]},
        x_label="time since agent start", title="dev score vs training reward") if reward else ""
    return charts


def render_run_html(report: dict) -> str:
    return render("run.html.j2", {"r": report, "charts": charts_for(report), "phases": PHASES})

"""The trust part of the reports: a run's findings (model provenance of every submission,
contamination, honey-token reads, attempts on protected paths) with their evidence and severity,
the per-run summary compare shows in its column and uses to exclude flagged runs from its gates,
and cost per point of held-out improvement. Reads the store only (findings_v, sql/compat.sql)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from autorl_tui.reports.analytics import _decode_json, _id_list

if TYPE_CHECKING:
    from autorl_tui.reports.analytics import Analytics

RANK = {"info": 0, "warning": 1, "critical": 2}


def findings_by_run(a: "Analytics", run_ids: list[str]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {rid: [] for rid in run_ids}
    if not run_ids:
        return out
    for row in a.query("findings", ids=_id_list(run_ids)):
        row["evidence"] = _decode_json(row["evidence"])
        out.setdefault(row["run_id"], []).append(row)
    return out


def summary(findings: list[dict]) -> dict:
    """flags (warning or critical), the worst severity, counts by kind, one line per flag."""
    flags = [f for f in findings if RANK.get(f["severity"], 0) > 0]
    worst = max((f["severity"] for f in findings), key=lambda s: RANK.get(s, 0), default=None)
    kinds: dict[str, int] = {}
    for f in flags:
        kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
    return {"n_findings": len(findings), "n_flags": len(flags), "flagged": bool(flags),
            "worst": worst if flags else ("clean" if findings else "none"),
            "by_kind": kinds, "lines": [f"{f['severity']}: {f['summary']}" for f in flags][:10]}


def provenance_rows(findings: list[dict]) -> list[dict]:
    """One row per checked submission: its verdict and the figures it rests on."""
    rows = []
    for f in findings:
        ev = f["evidence"] if isinstance(f["evidence"], dict) else {}
        if f["kind"] != "provenance":
            continue
        rows.append({"submission_seq": f.get("submission_seq"), "severity": f["severity"],
                     "verdict": ev.get("verdict") or "unknown", "median_rel": ev.get("median_rel"),
                     "max_rel": ev.get("max_rel"), "min_cos": ev.get("min_cos"), "far_share": ev.get("far_share"),
                     "low_rank_change": ev.get("low_rank_change"), "n_tensors": ev.get("n_tensors"),
                     "seconds": ev.get("seconds"), "furthest": (ev.get("furthest") or [])[:3],
                     "summary": f["summary"]})
    return rows


def run_trust(a: "Analytics", run_id: str) -> dict:
    findings = findings_by_run(a, [run_id])[run_id]
    return {**summary(findings), "findings": findings, "provenance": provenance_rows(findings)}


def cost_per_point(cost: dict, improvement: float | None) -> dict:
    """Tokens, dollars, GPU-hours and agent wall time per point of held-out improvement (None
    when the run did not improve: a cost per point needs a point)."""
    per = improvement if improvement is not None and improvement > 0 else None
    gpu_h = cost.get("gpu_allocated_hours")
    tokens = None if cost.get("tokens_in") is None and cost.get("tokens_out") is None else \
        (cost.get("tokens_in") or 0) + (cost.get("tokens_out") or 0)

    def over(value):
        return None if per is None or value is None else value / per

    return {"improvement": improvement, "tokens": tokens, "cost_usd": cost.get("cost_usd"), "gpu_hours": gpu_h,
            "agent_hours": None if cost.get("agent_s") is None else cost["agent_s"] / 3600,
            "tokens_per_point": over(tokens), "usd_per_point": over(cost.get("cost_usd")),
            "gpu_hours_per_point": over(gpu_h or None),          # a CPU run has no GPU cost per point
            "agent_hours_per_point": over(None if cost.get("agent_s") is None else cost["agent_s"] / 3600)}

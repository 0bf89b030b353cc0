"""AutoRL-Bench's view of a run's graded submissions (its scores.json entries and /submit answer),
built from our ledger rows. Pure functions of those rows: the engine's grading API serves them, and
the export, import and run-report diagnostics read them without reaching into the engine."""

from __future__ import annotations

from datetime import datetime

GRADED = ("scored", "error")     # the entries AutoRL-Bench keeps in scores.json (a failed one with score 0.0)


def iso(ts: float | None) -> str | None:
    """A timestamp as AutoRL-Bench writes it (ISO 8601), with the local offset so it is unambiguous."""
    return None if ts is None else datetime.fromtimestamp(ts).astimezone().isoformat()


def parse_iso(value) -> float | None:
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except (TypeError, ValueError):
        return None


def entry(row: dict, baseline: float | None, submission_id: int | None = None) -> dict:
    """One submission as an AutoRL-Bench scores.json entry; a failed grading scores 0.0 with `error`.
    `submission_id` is its place among the graded entries (AutoRL-Bench numbers its scores.json
    1..N); our `seq` counts every request, refused ones included."""
    failed = row["status"] == "error"
    score = 0.0 if failed or row.get("score") is None else float(row["score"])
    graded = row.get("graded_at") or row.get("received_at")
    item = {"submission_id": row["seq"] if submission_id is None else submission_id, "timestamp": iso(graded),
            "model_path": row.get("path"),
            "score": score, "baseline_score": baseline,
            "improvement": None if baseline is None else round(score - baseline, 6),
            "elapsed_seconds": None if row.get("graded_at") is None else round(row["graded_at"] - row["received_at"], 2)}
    if failed:
        item["error"] = row.get("error") or "grading failed"
    return item


def _graded(rows: list[dict]) -> list[dict]:
    return [r for r in sorted(rows, key=lambda r: r["seq"]) if r["status"] in GRADED]


def ledger(rows: list[dict], baseline: float | None) -> list[dict]:
    """The scores.json list: graded submissions (scored or failed) in order, numbered 1..N."""
    return [entry(r, baseline, i) for i, r in enumerate(_graded(rows), start=1)]


def response_as_of(rows: list[dict], row: dict, baseline: float | None) -> dict:
    """AutoRL-Bench's /submit answer for `row`: its entry, the best entry and the count of graded
    submissions as they stood once it was graded."""
    graded = _graded(rows)
    upto = [entry(r, baseline, i) for i, r in enumerate(graded, start=1) if r["seq"] <= row["seq"]]
    mine = next((e for e, r in zip(upto, graded) if r["seq"] == row["seq"]), None)
    this = mine or entry(row, baseline, len(upto) + 1)
    best = max(upto, key=lambda e: e["score"], default=this)   # first of equal scores, as max() keeps it
    return {**this, "best": best, "total_submissions": len(upto)}

"""The AutoRL-Bench side of the grading API (docs/autorl-bench.md): its submission entry, its
`gpu` field, its `scores.json` mirror and its `/time` fields, built from our ledger.

Our ledger (the store) stays the record; what is built here is a view of it. A submission's
AutoRL-Bench entry is derived from its row alone, and a response "as of" a submission from the rows
graded up to it, so the same content submitted again gets the earlier response unchanged."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

from autorl_tui.engine.safe_files import write_replace

GRADED = ("scored", "error")     # the entries AutoRL-Bench keeps in scores.json (a failed one with score 0.0)
SCORES_MIRROR = "scores.json"


class GpuRefused(ValueError):
    def __init__(self, message: str, available: list[str], code: str = "bad_gpu"):
        super().__init__(message)
        self.available, self.code = available, code


def iso(ts: float | None) -> str | None:
    """A timestamp as AutoRL-Bench writes it (ISO 8601), with the local offset so it is unambiguous."""
    return None if ts is None else datetime.fromtimestamp(ts).astimezone().isoformat()


def parse_iso(value) -> float | None:
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except (TypeError, ValueError):
        return None


def choose_gpus(value, available: list[str]) -> list[str]:
    """The devices one grading may use. `gpu` is "0", "0,1" or an int, and must name devices pinned
    to this run; without it the grading gets all of them (AutoRL-Bench takes the first one: ours
    are pinned to the run, so nothing else competes for them)."""
    if value is None:
        return list(available)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise GpuRefused(f'"gpu" must be a string like "0" or "0,1" or an integer (got {type(value).__name__})',
                         available, "bad_request")
    requested = [g.strip() for g in str(value).split(",") if g.strip()]
    if not requested:
        raise GpuRefused("gpu parameter is empty: leave it out to use all of this run's devices", available)
    outside = sorted(set(requested) - set(available))
    if outside:
        shown = available or "none: this run has no GPU, leave \"gpu\" out"
        raise GpuRefused(f"GPU {outside} not in available GPUs {shown} (from CUDA_VISIBLE_DEVICES)", available)
    return list(dict.fromkeys(requested))


def entry(row: dict, baseline: float | None) -> dict:
    """One submission as an AutoRL-Bench scores.json entry; a failed grading scores 0.0 with `error`."""
    failed = row["status"] == "error"
    score = 0.0 if failed or row.get("score") is None else float(row["score"])
    graded = row.get("graded_at") or row.get("received_at")
    item = {"submission_id": row["seq"], "timestamp": iso(graded), "model_path": row.get("path"),
            "score": score, "baseline_score": baseline,
            "improvement": None if baseline is None else round(score - baseline, 6),
            "elapsed_seconds": None if row.get("graded_at") is None else round(row["graded_at"] - row["received_at"], 2)}
    if failed:
        item["error"] = row.get("error") or "grading failed"
    return item


def ledger(rows: list[dict], baseline: float | None) -> list[dict]:
    """The scores.json list: graded submissions (scored or failed) in order."""
    return [entry(r, baseline) for r in sorted(rows, key=lambda r: r["seq"]) if r["status"] in GRADED]


def response_as_of(rows: list[dict], row: dict, baseline: float | None) -> dict:
    """AutoRL-Bench's /submit answer for `row`: its entry, the best entry and the count of graded
    submissions as they stood once it was graded."""
    upto = [e for e in ledger(rows, baseline) if e["submission_id"] <= row["seq"]]
    this = entry(row, baseline)
    best = max(upto, key=lambda e: e["score"], default=this)   # first of equal scores, as max() keeps it
    return {**this, "best": best, "total_submissions": len(upto)}


def write_scores_mirror(workspace: Path, rows: list[dict], baseline: float | None) -> None:
    """scores.json in the workspace, read-only, replaced whole (never written through a planted link).
    Agents may read it; the grades live in the store, so changing it changes nothing."""
    data = json.dumps(ledger(rows, baseline), indent=2, ensure_ascii=False) + "\n"
    write_replace(workspace, SCORES_MIRROR, data.encode())


def time_fields(*, start: float | None, budget_s: float, deadline: float | None, last_submit: float | None,
                end: float | None = None) -> dict:
    """AutoRL-Bench's /time: run_meta.json's fields (whole seconds) plus `now` and `remaining`."""
    now = int(time.time())
    meta = {"start_time": None if start is None else int(start), "timeout_s": int(budget_s),
            "last_submit_time": None if last_submit is None else int(last_submit),
            "end_time": None if end is None else int(end)}
    remaining = None if deadline is None else max(int(deadline) - now, 0)
    return {**meta, "now": now, "remaining": remaining}

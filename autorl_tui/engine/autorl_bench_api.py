"""The AutoRL-Bench side of the grading API (docs/autorl-bench.md): its submission entry, its
`gpu` field, its `scores.json` mirror and its `/time` fields, built from our ledger.

Our ledger (the store) stays the record; what is built here is a view of it. A submission's
AutoRL-Bench entry is derived from its row alone, and a response "as of" a submission from the rows
graded up to it, so the same content submitted again gets the earlier response unchanged."""

from __future__ import annotations

import json
import time
from pathlib import Path

from autorl_tui.safe_files import write_replace
from autorl_tui.interop.autorl_bench_ledger import GRADED, entry, iso, ledger, parse_iso, response_as_of

__all__ = ["GRADED", "GpuRefused", "choose_gpus", "entry", "iso", "ledger", "parse_iso", "response_as_of",
           "time_fields", "write_scores_mirror"]

SCORES_MIRROR = "scores.json"


class GpuRefused(ValueError):
    def __init__(self, message: str, available: list[str], code: str = "bad_gpu"):
        super().__init__(message)
        self.available, self.code = available, code


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

"""AutoRL-Bench's run diagnostics as its `core/metrics.py` (`compute_metrics(workspace, baseline,
base_model_path)`, microsoft/RD-Agent, rdagent/scenarios/rl/autorl_bench) computes them from a run
folder's scores.json and run_meta.json: written here from its definitions, statement for
statement, so a test can run "its code" on our export without RD-Agent installed. Kept
independent of autorl_tui on purpose (no import of ours): it is the yardstick.

What its code does, and this does the same:
- scores: scores.json's list (missing file: []); each entry's `score` with default 0.0;
- valid rate: entries with a truthy score > 0 over all entries (None with no entries);
- first_valid_idx: 1-based index of the first score > 0;
- run_meta.json read as is: start_time, end_time, timeout_s, last_submit_time (any may be null);
- first_valid_delay / time_to_first_improvement / time_to_best: int(entry time − start_time), only
  when start_time is truthy; the improvement scan stops at the first entry above the baseline even
  when its timestamp does not parse; time_to_best takes max() by score (the first of equal ones);
- monotonic_ratio: strict increases over len − 1, with at least two entries;
- copy_model_count: entries whose model_path resolves to base_model_path (only with a base path);
- time_used_ratio: (end − start) / timeout_s when all three are truthy;
- last_submit_gap: int(end − last_submit_time) when both are truthy."""

import json
from datetime import datetime
from pathlib import Path


def _when(value):
    try:
        return datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return None


def _div(n, d):
    return None if d == 0 else n / d


def compute_metrics(workspace: Path, baseline, base_model_path):
    workspace = Path(workspace)
    scores_file = workspace / "scores.json"
    entries = json.loads(scores_file.read_text()) if scores_file.exists() else []
    values = [e.get("score", 0.0) for e in entries]
    meta_file = workspace / "run_meta.json"
    meta = json.loads(meta_file.read_text()) if meta_file.exists() else {}
    start, end = meta.get("start_time"), meta.get("end_time")
    timeout, last = meta.get("timeout_s"), meta.get("last_submit_time")

    first_idx = next((i for i, v in enumerate(values, start=1) if v and v > 0), None)
    first_delay = None
    if start and first_idx:
        t = _when(entries[first_idx - 1].get("timestamp"))
        first_delay = int(t.timestamp() - start) if t else None
    first_improvement = None
    if baseline is not None and start:
        for e in entries:
            if e.get("score", 0.0) > baseline:
                t = _when(e.get("timestamp"))
                first_improvement = int(t.timestamp() - start) if t else None
                break
    monotonic = None
    if len(values) >= 2:
        monotonic = _div(sum(1 for a, b in zip(values, values[1:]) if b > a), len(values) - 1)
    copies = None
    if base_model_path:
        base = Path(base_model_path).resolve()
        copies = sum(1 for e in entries if e.get("model_path") and Path(e["model_path"]).resolve() == base)
    to_best = None
    if start and entries:
        t = _when(max(entries, key=lambda e: e.get("score", 0.0)).get("timestamp"))
        to_best = int(t.timestamp() - start) if t else None
    return {
        "valid_submission_rate": _div(len([v for v in values if v and v > 0]), len(values)),
        "first_valid_idx": first_idx,
        "first_valid_delay": first_delay,
        "score_trajectory": values,
        "time_to_first_improvement": first_improvement,
        "time_to_best": to_best,
        "monotonic_ratio": monotonic,
        "copy_model_count": copies,
        "time_used_ratio": _div(end - start, timeout) if start and end and timeout else None,
        "last_submit_gap": int(end - last) if end and last else None,
    }

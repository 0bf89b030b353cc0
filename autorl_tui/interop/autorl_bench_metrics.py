"""AutoRL-Bench's ten run diagnostics (its `core/metrics.py`, `reports/metrics.json`), computed
the way its code computes them from a run's scores.json entries and run_meta.json times, so that
ours and imported runs are measured alike. Times are whole seconds from the run's start."""

from __future__ import annotations

from pathlib import Path

from autorl_tui.interop.autorl_bench_ledger import parse_iso
from autorl_tui.store.run_spec import RunSpec

FIELDS = ("valid_submission_rate", "first_valid_idx", "first_valid_delay", "score_trajectory",
          "time_to_first_improvement", "time_to_best", "time_used_ratio", "monotonic_ratio",
          "copy_model_count", "last_submit_gap")


def _ratio(n: float, d: float) -> float | None:
    return None if d == 0 else n / d


def compute(entries: list[dict], *, start_time: float | None, end_time: float | None, timeout_s: float | None,
            last_submit_time: float | None, baseline: float | None, base_model_path: str | None,
            base_model_hash: str | None = None) -> dict:
    """`entries`: scores.json entries in order (a failed one has score 0.0). A copy of the base model
    is counted by path, as AutoRL-Bench does, and also by content when the entries carry a
    `content_hash` and the base model's hash is known (our API never accepts the base model's own
    path, so a copy is only visible by content here)."""
    scores = [e.get("score", 0.0) or 0.0 for e in entries]
    first_valid_idx = next((i for i, s in enumerate(scores, start=1) if s > 0), None)

    def since_start(entry: dict) -> int | None:
        ts = parse_iso(entry.get("timestamp"))
        return None if ts is None or not start_time else int(ts - start_time)

    first_valid_delay = since_start(entries[first_valid_idx - 1]) if first_valid_idx and start_time else None
    time_to_first_improvement = None
    if baseline is not None and start_time:
        improved = next((e for e in entries if (e.get("score", 0.0) or 0.0) > baseline), None)
        time_to_first_improvement = since_start(improved) if improved else None
    monotonic_ratio = None
    if len(scores) >= 2:
        monotonic_ratio = _ratio(sum(1 for a, b in zip(scores, scores[1:]) if b > a), len(scores) - 1)
    copy_model_count = None
    if base_model_path:
        base = Path(base_model_path).resolve()
        copy_model_count = sum(1 for e in entries if (e.get("model_path") and Path(e["model_path"]).resolve() == base)
                               or (base_model_hash and e.get("content_hash") == base_model_hash))
    time_to_best = None
    if start_time and entries:
        best = max(entries, key=lambda e: e.get("score", 0.0) or 0.0)
        time_to_best = since_start(best)
    return {
        "valid_submission_rate": _ratio(sum(1 for s in scores if s > 0), len(scores)),
        "first_valid_idx": first_valid_idx,
        "first_valid_delay": first_valid_delay,
        "score_trajectory": scores,
        "time_to_first_improvement": time_to_first_improvement,
        "time_to_best": time_to_best,
        "monotonic_ratio": monotonic_ratio,
        "copy_model_count": copy_model_count,
        "time_used_ratio": _ratio(end_time - start_time, timeout_s) if start_time and end_time and timeout_s else None,
        "last_submit_gap": int(end_time - last_submit_time) if end_time and last_submit_time else None,
    }


HASH_LIMIT_BYTES = 64 * 1024 * 1024


def folder_hash(folder: Path) -> str | None:
    """The content hash our submission snapshots get (grading_host/submissions.py): sha256 over sorted
    (relative path, file sha256). None for a missing folder or one over HASH_LIMIT_BYTES."""
    import hashlib

    if not folder.is_dir():
        return None
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    if sum(p.stat().st_size for p in files) > HASH_LIMIT_BYTES:
        return None
    outer = hashlib.sha256()
    for p in files:
        outer.update(f"{p.relative_to(folder)}\0{hashlib.sha256(p.read_bytes()).hexdigest()}\n".encode())
    return outer.hexdigest()


def _whole(t: float | None) -> int | None:
    return None if t is None else int(t)


def run_meta(run: dict, submissions: list[dict]) -> dict:
    """A run's clock as AutoRL-Bench's run_meta.json holds it: whole seconds, `end_time` null when
    the run has none (an imported run whose folder had none: a Ctrl-C'd AutoRL-Bench run)."""
    imported = RunSpec.from_dict(run.get("spec")).imported or {}
    graded = [s for s in submissions if s["status"] in ("scored", "error")]
    last = max((s.get("graded_at") or 0 for s in graded), default=0) or None
    start = run.get("started_at") or run.get("created_at")
    end = imported["end_time"] if "end_time" in imported else run.get("ended_at")
    return {"start_time": _whole(start), "timeout_s": _whole(run.get("budget_s")),
            "last_submit_time": _whole(imported.get("last_submit_time", last)), "end_time": _whole(end)}


def for_run(run: dict, submissions: list[dict], base_model_hash: str | None = None) -> dict:
    """The diagnostics of a run in our store (ours or imported): its graded submissions as
    AutoRL-Bench entries, its clock as the run_meta.json we export (whole seconds), so that
    AutoRL-Bench's own code on our export computes the same values."""
    from autorl_tui.interop.autorl_bench_ledger import ledger

    graded = [s for s in sorted(submissions, key=lambda s: s["seq"]) if s["status"] in ("scored", "error")]
    entries = ledger(graded, run.get("baseline_dev_score"))
    for e, s in zip(entries, graded):
        e["content_hash"] = s.get("content_hash")
    meta = run_meta(run, submissions)
    spec = RunSpec.from_dict(run.get("spec"))
    imported = spec.imported or {}
    base_path = imported.get("base_model_path")
    if base_path is None and run.get("workspace"):
        base_path = str(Path(run["workspace"]) / "models" / (spec.model_name or run.get("model") or ""))
        if base_model_hash is None:     # our API refuses the base model's own path: a copy shows by content
            base_model_hash = folder_hash(Path(base_path))
    return compute(entries, start_time=meta["start_time"], end_time=meta["end_time"],
                   timeout_s=meta["timeout_s"], last_submit_time=meta["last_submit_time"],
                   baseline=run.get("baseline_dev_score"), base_model_path=base_path, base_model_hash=base_model_hash)

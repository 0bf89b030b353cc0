"""Our runs in AutoRL-Bench's shape (`autorl-tui export --format autorl-bench --out DIR`):
DIR/results.csv with its columns, and per run DIR/workspace/<task>/<run id>/ with run_meta.json,
scores.json and reports/metrics.json, so its tools (and `autorl-tui import autorl-bench`) read them.

Its scores are what the agent saw, so `baseline` and `best_score` are our dev scores; our held-out
test score has no column there (it stays in our own export)."""

from __future__ import annotations

import csv
import io
import json
import os
from datetime import datetime
from pathlib import Path

from autorl_tui.interop.autorl_bench_ledger import ledger
from autorl_tui.interop import autorl_bench_metrics
from autorl_tui.interop.autorl_bench_files import RESULTS_COLUMNS
from autorl_tui.store.queries import StoreReader
from autorl_tui.store.records import RunRecord
from autorl_tui.store.run_spec import RunSpec


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _success(reader: StoreReader, run: RunRecord) -> bool:
    """AutoRL-Bench's `success`: the agent exited 0 (imported runs keep theirs)."""
    imported = run.spec.imported or {}
    if "success" in imported and imported["success"] is not None:
        return bool(imported["success"])
    return reader.last_exit_code(run.id) == 0


def _rerooted(path: str | None, run: dict, folder: Path) -> str | None:
    """A submission's model path as AutoRL-Bench's entries hold it, absolute inside the exported
    run folder: ours are relative to the workspace, an imported run's name its original folder.
    So its path-based `copy_model_count` on the export counts what ours counted."""
    if not path:
        return path
    original = (RunSpec.from_dict(run.get("spec")).imported or {}).get("original_workspace")
    if original and (path == original or path.startswith(original.rstrip("/") + "/")):
        return str(folder / os.path.relpath(path, original))
    return path if os.path.isabs(path) else str(folder / path)


def export(reader: StoreReader, out: Path, run_ids: list[str] | None = None) -> list[str]:
    """Write the files; returns the run ids exported. Only finished runs (done or failed)."""
    records = reader.finished_runs()
    if run_ids:
        missing = sorted(set(run_ids) - {r.id for r in records})
        if missing:
            from autorl_tui.exitcodes import UsageError

            raise UsageError(f"no finished run {', '.join(missing)} in this home; `autorl-tui runs list` shows them")
        records = [r for r in records if r.id in run_ids]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=RESULTS_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for record in records:
        run = record.to_dict()
        subs = [s.to_dict() for s in reader.submissions(record.id)]
        graded = [s for s in subs if s["status"] in ("scored", "error")]
        entries = ledger(graded, run.get("baseline_dev_score"))
        folder = out / "workspace" / run["task"] / run["id"]
        start, end = run.get("started_at") or run["created_at"], run.get("ended_at")
        meta = autorl_bench_metrics.run_meta(run, subs)
        _write(folder / "run_meta.json", json.dumps(meta, indent=2) + "\n")
        for e in entries:
            e["model_path"] = _rerooted(e["model_path"], run, folder)
        _write(folder / "scores.json", json.dumps(entries, indent=2, ensure_ascii=False) + "\n")
        metrics = autorl_bench_metrics.for_run(run, subs)
        _write(folder / "reports" / "metrics.json", json.dumps(metrics, indent=2, ensure_ascii=False) + "\n")
        best = max(entries, key=lambda e: e["score"], default=None)
        writer.writerow({
            "run_id": run["id"], "timestamp": datetime.fromtimestamp(start).strftime("%Y-%m-%d %H:%M:%S"),
            "task": run["task"], "agent": run["agent"], "driver_model": run.get("driver") or "unknown",
            "base_model": run["model"], "baseline": run.get("baseline_dev_score"),
            "best_score": best["score"] if best else 0, "improvement": best["improvement"] if best else None,
            "submissions": len(entries), "duration_s": round((end or start) - start),
            "success": _success(reader, record), "workspace": str(folder)})
    _write(out / "results.csv", buf.getvalue())
    return [r.id for r in records]

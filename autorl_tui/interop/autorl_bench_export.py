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
from autorl_tui.store.db import decode_row


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _success(conn, run: dict) -> bool:
    """AutoRL-Bench's `success`: the agent exited 0 (imported runs keep theirs)."""
    imported = (run.get("spec") or {}).get("imported") or {}
    if "success" in imported and imported["success"] is not None:
        return bool(imported["success"])
    row = conn.execute("SELECT exit_code FROM attempts WHERE run_id=? ORDER BY number DESC LIMIT 1",
                       (run["id"],)).fetchone()
    return row is not None and row[0] == 0


def export(conn, out: Path, run_ids: list[str] | None = None) -> list[str]:
    """Write the files; returns the run ids exported. Only finished runs (done or failed)."""
    sql = "SELECT * FROM runs WHERE state IN ('done', 'failed')"
    runs = [decode_row("runs", dict(r)) for r in conn.execute(sql + " ORDER BY created_at, id")]
    if run_ids:
        missing = sorted(set(run_ids) - {r["id"] for r in runs})
        if missing:
            from autorl_tui.exitcodes import UsageError

            raise UsageError(f"no finished run {', '.join(missing)} in this home; `autorl-tui runs list` shows them")
        runs = [r for r in runs if r["id"] in run_ids]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=RESULTS_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for run in runs:
        subs = [dict(s) for s in conn.execute("SELECT * FROM submissions WHERE run_id=? ORDER BY seq", (run["id"],))]
        graded = [s for s in subs if s["status"] in ("scored", "error")]
        entries = ledger(graded, run.get("baseline_dev_score"))
        folder = out / "workspace" / run["task"] / run["id"]
        start, end = run.get("started_at") or run["created_at"], run.get("ended_at")
        last = max((s["graded_at"] or 0 for s in graded), default=0) or None
        meta = {"start_time": int(start), "timeout_s": int(run["budget_s"]),
                "last_submit_time": None if last is None else int(last), "end_time": None if end is None else int(end)}
        _write(folder / "run_meta.json", json.dumps(meta, indent=2) + "\n")
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
            "success": _success(conn, run), "workspace": str(folder)})
    _write(out / "results.csv", buf.getvalue())
    return [r["id"] for r in runs]

"""Everything about a run, machine-readable, read from the store only. The top level carries the
headline numbers (scores on a 0-100 scale, improvement in points) so scripts need not dig."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from autorl_tui.store.isolation import recorded_isolation
from autorl_tui.store.db import decode_row

EXPORT_FORMAT = "autorl-tui.run-export/1"


def _rows(conn: sqlite3.Connection, table: str, sql: str, params=()) -> list[dict]:
    return [decode_row(table, dict(r)) for r in conn.execute(sql, params).fetchall()]


def export_run(conn: sqlite3.Connection, run_id: str, *, include_events: bool = True,
               include_samples: bool = True) -> dict:
    run = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
    if run is None:
        raise KeyError(run_id)
    run = decode_row("runs", dict(run))
    submissions = _rows(conn, "submissions", "SELECT * FROM submissions WHERE run_id=? ORDER BY seq", (run_id,))
    if include_samples:
        for sub in submissions:
            sub["samples"] = _rows(conn, "samples", "SELECT * FROM samples WHERE submission_id=? ORDER BY split, id",
                                   (sub["id"],))
    baseline_ids = set()
    for ev in conn.execute("SELECT data FROM events WHERE run_id=? AND kind='harness' AND data LIKE '%baseline_id%'",
                           (run_id,)):
        try:
            baseline_ids.add(json.loads(ev[0])["baseline_id"])
        except (ValueError, KeyError, TypeError):
            pass
    baselines = []
    for bid in sorted(baseline_ids):
        b = decode_row("baselines", dict(conn.execute("SELECT * FROM baselines WHERE id=?", (bid,)).fetchone()))
        if include_samples:
            b["samples"] = _rows(conn, "samples", "SELECT * FROM samples WHERE baseline_id=? ORDER BY id", (bid,))
        baselines.append(b)
    out = {
        "format": EXPORT_FORMAT,
        "run_id": run_id,
        "task": run["task"], "agent": run["agent"], "model": run["model"], "seed": run["seed"],
        "state": run["state"],
        "isolation": recorded_isolation(run.get("spec"), run["executor"]),   # "none": the agent ran unisolated
        "baseline_score": run["baseline_score"],
        "baseline_dev_score": run["baseline_dev_score"],
        "best_dev_score": run["best_dev_score"],
        "test_score": run["test_score"],
        "improvement": run["improvement"],
        "dev_improvement": run["dev_improvement"],
        "end_reason": run["end_reason"],
        "failure_source": run["failure_source"],
        "wall_time_s": (run["ended_at"] - run["created_at"]) if run["ended_at"] else None,
        "agent_time_s": (run["ended_at"] - run["started_at"]) if run["ended_at"] and run["started_at"] else None,
        "run": run,
        "attempts": _rows(conn, "attempts", "SELECT * FROM attempts WHERE run_id=? ORDER BY number", (run_id,)),
        "submissions": submissions,
        "baselines": baselines,
        "revisions": _rows(conn, "revisions", "SELECT * FROM revisions WHERE run_id=? ORDER BY seq", (run_id,)),
        "metrics": [dict(r) for r in conn.execute(
            "SELECT ts, step, name, value, source, phase FROM metrics WHERE run_id=? ORDER BY id", (run_id,))],
        "resources": _rows(conn, "resources", "SELECT ts, cpu_percent, rss_bytes, n_procs, gpus FROM resources "
                                              "WHERE run_id=? ORDER BY id", (run_id,)),
    }
    if include_events:
        out["events"] = _rows(conn, "events", "SELECT id, attempt, ts, kind, level, message, data FROM events "
                                              "WHERE run_id=? ORDER BY id", (run_id,))
    return out


def write_json_atomic(path: Path, data) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=1, default=str, allow_nan=True)
    tmp.replace(path)

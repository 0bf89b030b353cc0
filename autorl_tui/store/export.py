"""Everything about a run, machine-readable, read from the store only. The top level carries the
headline numbers (scores on a 0-100 scale, improvement in points) so scripts need not dig.

The run and its submissions are read as the house's typed records (store/records.py: RunRecord,
SubmissionRecord) and exported as their `to_dict()`, the stored row with its JSON columns decoded;
the tables without a record are their rows, decoded the same way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

from autorl_tui.store.isolation import recorded_exposures, recorded_isolation
from autorl_tui.store.db import decode_row
from autorl_tui.store.records import Record, Rows, RunRecord, SubmissionRecord

EXPORT_FORMAT = "autorl-tui.run-export/1"


def _as_stored(record: Record, row) -> dict:
    """The record's `to_dict()` with the columns its row has: a store an older version wrote, read
    before its migration, lacks the later columns, and its export leaves them out as before."""
    keys = set(row.keys())
    return {k: v for k, v in record.to_dict().items() if k in keys}


def _decoded(table: str, row) -> dict:
    """A row of a table without a record, its JSON columns decoded."""
    return cast(dict, decode_row(table, row))


def _rows(rows: Rows, table: str, sql: str, params=()) -> list[dict]:
    return [_decoded(table, r) for r in rows(sql, params)]


def export_run(rows: Rows, run_id: str, *, include_events: bool = True, include_samples: bool = True) -> dict:
    found = rows("SELECT * FROM runs WHERE id = ?", (run_id,))
    if not found:
        raise KeyError(run_id)
    run = RunRecord.from_row(found[0])
    sub_rows = rows("SELECT * FROM submissions WHERE run_id=? ORDER BY seq", (run_id,))
    submissions = [SubmissionRecord.from_row(r) for r in sub_rows]
    exported_subs = [_as_stored(s, r) for s, r in zip(submissions, sub_rows)]
    if include_samples:
        for sub, out_sub in zip(submissions, exported_subs):
            out_sub["samples"] = _rows(rows, "samples",
                                       "SELECT * FROM samples WHERE submission_id=? ORDER BY split, id", (sub.id,))
    baseline_ids = set()
    for ev in rows("SELECT data FROM events WHERE run_id=? AND kind='harness' AND data LIKE '%baseline_id%'",
                   (run_id,)):
        try:
            baseline_ids.add(json.loads(ev["data"])["baseline_id"])
        except (ValueError, KeyError, TypeError):
            pass
    baselines = []
    for bid in sorted(baseline_ids):
        b = _decoded("baselines", rows("SELECT * FROM baselines WHERE id=?", (bid,))[0])
        if include_samples:
            b["samples"] = _rows(rows, "samples", "SELECT * FROM samples WHERE baseline_id=? ORDER BY id", (bid,))
        baselines.append(b)
    spec = run.spec
    out = {
        "format": EXPORT_FORMAT,
        "run_id": run_id,
        "task": run.task, "agent": run.agent, "model": run.model, "seed": run.seed,
        "state": run.state,
        "isolation": recorded_isolation(spec, run.executor),   # "none": the agent ran unisolated
        "protocol": spec.protocol_name or "default",   # the task card's named protocol
        "data_origin": spec.data_origin,
        "exposures": recorded_exposures(spec),     # e.g. "network: host"
        "baseline_score": run.baseline_score,
        "baseline_dev_score": run.baseline_dev_score,
        "best_dev_score": run.best_dev_score,
        "test_score": run.test_score,
        "improvement": run.improvement,
        "dev_improvement": run.dev_improvement,
        "end_reason": run.end_reason,
        "failure_source": run.failure_source,
        "wall_time_s": run.wall_s,
        "agent_time_s": (run.ended_at - run.started_at) if run.ended_at and run.started_at else None,
        "run": _as_stored(run, found[0]),
        "attempts": _rows(rows, "attempts", "SELECT * FROM attempts WHERE run_id=? ORDER BY number", (run_id,)),
        "submissions": exported_subs,
        "baselines": baselines,
        "revisions": _rows(rows, "revisions", "SELECT * FROM revisions WHERE run_id=? ORDER BY seq", (run_id,)),
        "metrics": rows("SELECT ts, step, name, value, source, phase FROM metrics WHERE run_id=? ORDER BY id",
                        (run_id,)),
        "findings": _findings(rows, run_id),
        "resources": _resources(rows, run_id),
    }
    if include_events:
        out["events"] = _rows(rows, "events", "SELECT id, attempt, ts, kind, level, message, data FROM events "
                                              "WHERE run_id=? ORDER BY id", (run_id,))
    return out


def _resources(rows: Rows, run_id: str) -> list[dict]:
    """The run's resource samples with the host's load average (load1/5/15, from schema 6 on; a
    store opened read-only before its migration has no such columns, and its samples none)."""
    return [{k: v for k, v in r.items() if k not in ("id", "run_id")}
            for r in _rows(rows, "resources", "SELECT * FROM resources WHERE run_id=? ORDER BY id", (run_id,))]


def _findings(rows: Rows, run_id: str) -> list[dict]:
    """The run's trust findings with their evidence (store/findings.py); none in a store before them."""
    if not rows("SELECT name FROM sqlite_master WHERE type='table' AND name='findings'", ()):
        return []
    return _rows(rows, "findings", "SELECT * FROM findings WHERE run_id=? ORDER BY ts, id", (run_id,))


def write_json_atomic(path: Path, data) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=1, default=str, allow_nan=True)
    tmp.replace(path)

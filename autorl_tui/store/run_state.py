"""The engine's named queries and writes: every statement the engine runs against the store, each
a typed method of `Store` (a mixin of it, so that the single writer stays one object).

Writes keep the store's commit rules (db.py): buffered appends stay buffered, anything that changes
state commits now. Row shapes: store/engine_records.py."""

from __future__ import annotations

from typing import Any, Iterable

from autorl_tui.store.engine_records import (AttemptRow, BaselineRow, GpuHolder, LogVolume, QueueEntry,
                                             RevisionMeta)
from autorl_tui.store.records import RunRecord, SubmissionRecord

RunRow = dict[str, Any]
"""A `runs` row as it travels (events, the engine's socket): RunRecord.to_dict()'s shape, `spec`
decoded; `RunRecord.from_row` types it (store/records.py holds the table's one typed row)."""

# Submissions that count against the run's cap (`rejected` ones and duplicates do not).
CAP_STATUSES = ("scored", "grading", "received", "error")


class RunStateQueries:
    """Mixed into `Store`: relies on its primitives (query, one, get, rows, insert, update, ...)."""

    # ---------------------------------------------------------------- plans and runs
    def add_plan(self, plan_id: str, name: str, source: str | None, created_at: float) -> None:
        self.insert("plans", {"id": plan_id, "name": name, "source": source, "created_at": created_at})

    def add_run(self, run: RunRecord | RunRow) -> str:
        """A new run (a row of some columns: the schema's defaults fill the others)."""
        return str(self.insert("runs", run.to_dict() if isinstance(run, RunRecord) else dict(run)))

    def count_runs(self) -> int:
        return self.one("SELECT COUNT(*) AS n FROM runs")["n"]

    def last_queue_pos(self) -> float:
        """The highest queue position of any run (0 when there is none)."""
        return self.one("SELECT COALESCE(MAX(queue_pos), 0) AS m FROM runs")["m"]

    def first_queued_pos(self) -> float:
        """The lowest queue position among queued runs (0 when none is queued)."""
        return self.one("SELECT COALESCE(MIN(queue_pos), 0) AS m FROM runs WHERE state='queued'")["m"]

    def last_event_at(self, run_id: str) -> float | None:
        """When the run's newest event was written (None without events)."""
        row = self.one("SELECT ts FROM events WHERE run_id = ? ORDER BY id DESC LIMIT 1", (run_id,))
        return row["ts"] if row else None

    def last_step(self, run_id: str) -> int | None:
        """The highest training step any of the run's metric series reached."""
        row = self.one("SELECT MAX(step) AS step FROM metrics WHERE run_id = ?", (run_id,))
        return row["step"] if row else None

    def top_queued_priority(self) -> int:
        """The highest priority among queued runs (0 when none is queued)."""
        return int(self.one("SELECT COALESCE(MAX(priority), 0) AS m FROM runs WHERE state='queued'")["m"])

    def run(self, run_id: str) -> RunRow | None:
        return self.get("runs", run_id)

    def run_summaries(self, limit: int | None = None, after: tuple[float, str] | None = None) -> list[RunRow]:
        """Run rows without their spec (the console's snapshot: the spec is read with a run's
        history), newest first as `runs`; `limit` rows after the (created_at, id) cursor `after`."""
        columns = ", ".join(c for c in self._run_columns() if c != "spec")
        sql, params = f"SELECT {columns} FROM runs", []
        if after is not None:
            sql += " WHERE created_at < ? OR (created_at = ? AND id < ?)"
            params = [after[0], after[0], after[1]]
        sql += " ORDER BY created_at DESC, id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return self.rows("runs", sql, params)

    def _run_columns(self) -> list[str]:
        return [r["name"] for r in self.query("PRAGMA table_info(runs)")]

    def recent_dev_scores(self, run_ids: list[str], per_run: int) -> dict[str, list[tuple[int, float]]]:
        """The last `per_run` graded dev scores of each run, oldest first, as (seq, score)."""
        if not run_ids:
            return {}
        marks = ", ".join("?" for _ in run_ids)
        rows = self.query(
            "SELECT run_id, seq, score FROM (SELECT run_id, seq, score, ROW_NUMBER() OVER "
            "(PARTITION BY run_id ORDER BY seq DESC) AS rn FROM submissions "
            f"WHERE score IS NOT NULL AND run_id IN ({marks})) WHERE rn <= ? ORDER BY run_id, seq",
            [*run_ids, int(per_run)])
        out: dict[str, list[tuple[int, float]]] = {}
        for r in rows:
            out.setdefault(r["run_id"], []).append((r["seq"], r["score"]))
        return out

    def runs(self, states: Iterable[str] | None = None) -> list[RunRow]:
        """Run rows, newest first; only those in `states` when given."""
        sql, params = "SELECT * FROM runs", []
        states = list(states or [])
        if states:
            sql += f" WHERE state IN ({', '.join('?' for _ in states)})"
            params = states
        return self.rows("runs", sql + " ORDER BY created_at DESC, id DESC", params)

    def any_run_on(self, executor: str) -> bool:
        """Whether any run of this home ever used `executor` (the engine probes Docker only then)."""
        return self.query("SELECT 1 FROM runs WHERE executor = ? LIMIT 1", (executor,)) != []

    def set_run_fields(self, run_id: str, fields: dict[str, Any]) -> None:
        """Update a run's columns and commit now."""
        self.update("runs", run_id, fields)

    def queued_runs(self) -> list[QueueEntry]:
        """Queued runs in the order the queue serves them."""
        rows = self.query("SELECT id, priority, queue_pos, gpus_requested, created_at, budget_s, not_before, executor "
                          "FROM runs WHERE state='queued' ORDER BY priority DESC, queue_pos ASC, created_at ASC")
        return [QueueEntry(run_id=r["id"], priority=r["priority"], queue_pos=r["queue_pos"],
                           gpus_requested=r["gpus_requested"], created_at=r["created_at"], budget_s=r["budget_s"],
                           not_before=r["not_before"], executor=r["executor"] or "local") for r in rows]

    # ---------------------------------------------------------------- attempts
    def add_attempt(self, row: AttemptRow) -> int:
        return self.insert("attempts", dict(row))

    def update_attempt(self, run_id: str, number: int, fields: dict[str, Any]) -> None:
        self.update_where("attempts", {"run_id": run_id, "number": number}, fields)

    def stage_attempt_offsets(self, run_id: str, number: int, offsets: dict[str, Any]) -> None:
        """Tail offsets, committed with the rows read up to them (Store.stage_update)."""
        self.stage_update("attempts", {"run_id": run_id, "number": number}, {"offsets": offsets})

    def latest_attempt(self, run_id: str) -> AttemptRow | None:
        rows = self.rows("attempts", "SELECT * FROM attempts WHERE run_id=? ORDER BY number DESC LIMIT 1", (run_id,))
        return rows[0] if rows else None

    def gpu_holders(self, active_states: Iterable[str]) -> list[GpuHolder]:
        """The current attempt of every run in `active_states`, with the devices it holds."""
        states = list(active_states)
        rows = self.rows("attempts", gpu_holders_sql(len(states)), states)
        return [GpuHolder(run_id=r["run_id"], gpus=[str(g) for g in (r.get("gpus") or [])]) for r in rows]

    # ---------------------------------------------------------------- submissions
    def add_submission(self, run_id: str, attempt: int, path: str, received_at: float) -> tuple[int, int]:
        """A new submission in state `received`, numbered after the run's last: (id, seq)."""
        seq = self.one("SELECT COALESCE(MAX(seq), 0) AS n FROM submissions WHERE run_id=?", (run_id,))["n"] + 1
        sub_id = self.insert("submissions", {"run_id": run_id, "attempt": attempt, "seq": seq, "path": path,
                                             "received_at": received_at, "status": "received"})
        return sub_id, seq

    def _submission_rows(self, where: str, params: Iterable = ()) -> list[SubmissionRecord]:
        return [SubmissionRecord.from_row(r) for r in self.query(f"SELECT * FROM submissions WHERE {where}", params)]

    def submission(self, sub_id: int) -> SubmissionRecord | None:
        rows = self._submission_rows("id = ?", (sub_id,))
        return rows[0] if rows else None

    def update_submission(self, sub_id: int, fields: dict[str, Any]) -> SubmissionRecord:
        """Update, commit, and return the row as it now is."""
        self.update("submissions", sub_id, fields)
        [row] = self._submission_rows("id = ?", (sub_id,))
        return row

    def capped_submission_times(self, run_id: str) -> list[float]:
        """When each submission that counts against the cap was received, in order."""
        rows = self.query(f"SELECT received_at FROM submissions WHERE run_id=? AND status IN "
                          f"({', '.join('?' for _ in CAP_STATUSES)}) ORDER BY seq", (run_id, *CAP_STATUSES))
        return [r["received_at"] for r in rows]

    def scored_with_content(self, run_id: str, content_hash: str, exclude_id: int) -> SubmissionRecord | None:
        """The first scored submission of the run with this content, other than `exclude_id`."""
        rows = self._submission_rows("run_id=? AND content_hash=? AND status='scored' AND id != ? "
                                     "ORDER BY seq LIMIT 1", (run_id, content_hash, exclude_id))
        return rows[0] if rows else None

    def best_submission(self, run_id: str) -> SubmissionRecord | None:
        """The selected submission: the best dev score, the earliest among equals."""
        rows = self._submission_rows("run_id=? AND status='scored' ORDER BY score DESC, seq ASC LIMIT 1",
                                     (run_id,))
        return rows[0] if rows else None

    def graded_submissions(self, run_id: str) -> list[dict[str, Any]]:
        """Scored or failed submissions (what AutoRL-Bench keeps in scores.json)."""
        return self.query("SELECT seq, path, status, score, error, received_at, graded_at FROM submissions "
                          "WHERE run_id=? AND status IN ('scored', 'error')", (run_id,))

    def last_graded_at(self, run_id: str) -> float | None:
        return self.one("SELECT MAX(graded_at) AS t FROM submissions WHERE run_id=? AND status IN "
                        "('scored', 'error')", (run_id,))["t"]

    def submission_summaries(self, run_id: str) -> list[dict[str, Any]]:
        """What the agent may see of its submissions, in order."""
        return self.query("SELECT seq, path, status, score, improvement, error, received_at, graded_at, "
                          "content_hash FROM submissions WHERE run_id=? ORDER BY seq", (run_id,))

    def submissions(self, run_id: str) -> list[SubmissionRecord]:
        return self._submission_rows("run_id = ? ORDER BY seq", (run_id,))

    def interrupted_submissions(self, run_id: str) -> list[SubmissionRecord]:
        """Submissions an engine stop caught between intake and a grade."""
        return self._submission_rows("run_id=? AND status IN ('received', 'grading')", (run_id,))

    # ---------------------------------------------------------------- baselines and samples
    def cached_baseline(self, task: str, model: str, protocol_hash: str, grader_version: str,
                        split: str, grading: str | None = None) -> BaselineRow | None:
        """grading: "BACKEND/DEVICE"; a baseline graded otherwise (a vLLM one on a GPU for a CPU
        grading) is not this one. Rows from before migration 7 have none: graded again."""
        rows = self.rows("baselines", "SELECT * FROM baselines WHERE task=? AND model=? AND protocol_hash=? "
                                      "AND grader_version=? AND split=? AND grading IS ?",
                         (task, model, protocol_hash, grader_version, split, grading))
        return rows[0] if rows else None

    def add_baseline(self, row: BaselineRow) -> int:
        return self.insert("baselines", dict(row))

    def add_samples(self, rows: list[dict[str, Any]]) -> int:
        return self.insert_many("samples", rows)

    def delete_samples(self, submission_id: int, split: str) -> None:
        self.write_atomically([("DELETE FROM samples WHERE submission_id=? AND split=?", (submission_id, split))])

    # ---------------------------------------------------------------- code revisions
    def last_revision_manifest(self, run_id: str) -> dict[str, str] | None:
        rows = self.rows("revisions", "SELECT manifest FROM revisions WHERE run_id=? ORDER BY seq DESC LIMIT 1",
                         (run_id,))
        return rows[0]["manifest"] if rows else None

    def last_revision_id(self, run_id: str) -> int | None:
        row = self.one("SELECT id FROM revisions WHERE run_id=? ORDER BY seq DESC LIMIT 1", (run_id,))
        return row["id"] if row else None

    def add_revision(self, run_id: str, *, ts: float, reason: str, manifest: dict[str, str], total_bytes: int,
                     skipped: Any) -> tuple[int, int]:
        """A new code revision, numbered after the run's last: (id, seq)."""
        seq = self.one("SELECT COALESCE(MAX(seq), 0) AS n FROM revisions WHERE run_id=?", (run_id,))["n"] + 1
        rev_id = self.insert("revisions", {"run_id": run_id, "seq": seq, "ts": ts, "reason": reason,
                                           "manifest": manifest, "n_files": len(manifest), "total_bytes": total_bytes,
                                           "skipped": skipped})
        return rev_id, seq

    def revision_list(self, run_id: str) -> list[RevisionMeta]:
        return self.rows("revisions", "SELECT id, seq, ts, reason, n_files, total_bytes FROM revisions "
                                      "WHERE run_id = ? ORDER BY seq", (run_id,))

    # ---------------------------------------------------------------- events, metrics, resources
    def stage_session_update(self, session_id: int, fields: dict[str, Any]) -> None:
        """A training session's change, committed with the points read so far (Store.stage_update)."""
        self.stage_update("training_sessions", {"id": session_id}, fields)

    def stage_metric_update(self, metric_id: int, fields: dict[str, Any]) -> None:
        """A stored point refined by a better source, committed with the tail offsets."""
        self.stage_update("metrics", {"id": metric_id}, fields)

    def log_volume(self, run_id: str) -> LogVolume:
        row = self.one("SELECT COUNT(*) AS n, COALESCE(SUM(LENGTH(message) + COALESCE(LENGTH(data), 0)), 0) AS b "
                       "FROM events WHERE run_id=? AND kind IN ('stdout', 'stderr', 'action')", (run_id,))
        return LogVolume(events=row["n"], bytes=row["b"])

    def events_tail(self, run_id: str, limit: int) -> list[dict[str, Any]]:
        """The run's last `limit` events, oldest first."""
        return self.rows("events", "SELECT * FROM (SELECT id, ts, kind, level, message, data FROM events "
                                   "WHERE run_id = ? ORDER BY id DESC LIMIT ?) ORDER BY id", (run_id, int(limit)))

    def count_events(self, run_id: str) -> int:
        return self.one("SELECT COUNT(*) AS n FROM events WHERE run_id = ?", (run_id,))["n"]

    def metrics_tail(self, run_id: str, limit: int) -> list[dict[str, Any]]:
        """The run's last `limit` metric points, oldest first."""
        return self.query("SELECT * FROM (SELECT id, ts, step, name, value, source, phase, session_id FROM metrics "
                          "WHERE run_id = ? ORDER BY id DESC LIMIT ?) ORDER BY id", (run_id, int(limit)))

    def training_sessions_of(self, run_id: str, attempt: int) -> list[dict[str, Any]]:
        return self.rows("training_sessions", "SELECT * FROM training_sessions WHERE run_id=? AND attempt=?",
                         (run_id, attempt))

    def session_points(self, run_id: str) -> list[dict[str, Any]]:
        """Stored points that belong to a training session, in order (to restore a session tracker)."""
        return self.query("SELECT id, session_id, name, source, step, ts, value FROM metrics "
                          "WHERE run_id=? AND session_id IS NOT NULL ORDER BY id", (run_id,))

    def last_resource_sample(self, run_id: str) -> dict[str, Any] | None:
        rows = self.rows("resources", "SELECT * FROM resources WHERE run_id = ? ORDER BY id DESC LIMIT 1", (run_id,))
        return rows[0] if rows else None


def gpu_holders_sql(n_states: int) -> str:
    """The current attempt (run id, its devices) of every run in one of `n_states` states."""
    return ("SELECT a.run_id, a.gpus FROM attempts a JOIN runs r ON r.id = a.run_id "
            f"WHERE r.state IN ({','.join('?' * n_states)}) AND a.number = r.current_attempt")

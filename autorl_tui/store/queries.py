"""Named read queries over the store, returning records (`store.records`): the one place readers
outside the store find its SQL. Readers other than the engine (the console, listings, exports)
open the store read-only (`StoreReader.open`); the engine's own process reads through its writer
(`StoreReader.over`, under the writer's lock)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable

from autorl_tui.store.db import Store, open_readonly
from autorl_tui.store.export import export_run
from autorl_tui.store.records import CpuUsage, Rows, RunRecord, SubmissionRecord
from autorl_tui.store.revisions import revision_diff
from autorl_tui.store.run_state import gpu_holders_sql

FINISHED = ("done", "failed")     # what an export in AutoRL-Bench's shape carries


class StoreReader:
    def __init__(self, rows: Rows, close: Callable[[], None] | None = None):
        self._rows = rows
        self._close = close

    @classmethod
    def open(cls, path: str | os.PathLike) -> StoreReader:
        """A read-only connection of its own; StoreError when there is no store at `path`."""
        conn = open_readonly(path)
        return cls(lambda sql, params=(): [dict(r) for r in conn.execute(sql, tuple(params))], conn.close)

    @classmethod
    def over(cls, store: Store) -> StoreReader:
        """Reads through the writer's connection (sees what it has committed)."""
        return cls(store.query)

    def close(self) -> None:
        if self._close is not None:
            self._close()
            self._close = None

    def __enter__(self) -> StoreReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ runs
    def run(self, run_id: str) -> RunRecord | None:
        rows = self._rows("SELECT * FROM runs WHERE id = ?", (run_id,))
        return RunRecord.from_row(rows[0]) if rows else None

    def runs(self, *, states: Iterable[str] = (), plan: str | None = None, limit: int | None = None,
             offset: int = 0) -> list[RunRecord]:
        """Newest first; only runs in one of `states` and of plan `plan` when given; a page of at
        most `limit` rows after the first `offset` when limit is given."""
        states = list(states)
        where, params = [], []
        if states:
            where.append(f"state IN ({', '.join('?' for _ in states)})")
            params += states
        if plan is not None:
            where.append("plan_name = ?")
            params.append(plan)
        sql = "SELECT * FROM runs" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY created_at DESC, id DESC"
        if limit is not None:
            sql += " LIMIT ? OFFSET ?"
            params += [int(limit), int(offset)]
        return [RunRecord.from_row(r) for r in self._rows(sql, params)]

    def last_event_at(self, run_id: str) -> float | None:
        """When the run's newest event was written (None without events)."""
        rows = self._rows("SELECT ts FROM events WHERE run_id = ? ORDER BY id DESC LIMIT 1", (run_id,))
        return rows[0]["ts"] if rows else None

    def finished_runs(self) -> list[RunRecord]:
        """Runs done or failed, oldest first."""
        marks = ", ".join("?" for _ in FINISHED)
        return [RunRecord.from_row(r) for r in self._rows(
            f"SELECT * FROM runs WHERE state IN ({marks}) ORDER BY created_at, id", FINISHED)]

    def run_ids_starting(self, prefix: str) -> list[str]:
        """Ids that start with `prefix` (taken literally: no wildcards)."""
        pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self._rows("SELECT id FROM runs WHERE id LIKE ? ESCAPE '\\'", (pattern,))
        return [r["id"] for r in rows if r["id"].startswith(prefix)]   # LIKE ignores ASCII case

    # ------------------------------------------------------------------ a run's rows
    def submissions(self, run_id: str) -> list[SubmissionRecord]:
        return [SubmissionRecord.from_row(r) for r in self._rows(
            "SELECT * FROM submissions WHERE run_id = ? ORDER BY seq", (run_id,))]

    def last_exit_code(self, run_id: str) -> int | None:
        """The exit code of the run's last attempt (None: no attempt, or it has none)."""
        rows = self._rows("SELECT exit_code FROM attempts WHERE run_id = ? ORDER BY number DESC LIMIT 1", (run_id,))
        return rows[0]["exit_code"] if rows else None

    def live_attempts(self, executor: str) -> list[tuple[str, int, str]]:
        """(run id, attempt number, log folder) of the attempts of `executor` whose agent is live now."""
        rows = self._rows("SELECT a.run_id, a.number, a.log_dir FROM attempts a JOIN runs r ON r.id = a.run_id "
                          "WHERE a.executor = ? AND a.state IN ('starting', 'running') "
                          "AND r.state IN ('running', 'paused', 'finalizing')", (executor,))
        return [(r["run_id"], r["number"], r["log_dir"]) for r in rows]

    def gpu_holders(self, active_states: Iterable[str]) -> dict[str, str]:
        """{device id: the run holding it} over the current attempts of runs in `active_states`."""
        states = list(active_states)
        held = {}
        for r in self._rows(gpu_holders_sql(len(states)), states):
            for dev in json.loads(r["gpus"] or "[]"):
                held[str(dev)] = r["run_id"]
        return held

    def cpu_usage(self, run_id: str) -> CpuUsage:
        row = self._rows("SELECT AVG(cpu_percent) AS mean, COUNT(*) AS n FROM resources WHERE run_id = ?",
                         (run_id,))[0]
        return CpuUsage(mean_percent=row["mean"], samples=row["n"])

    def output_lines(self, run_id: str, kind: str = "stdout") -> list[str]:
        """The stored lines of one stream of the agent's output (`stdout`, `stderr`, `action`), in order."""
        return [r["message"] for r in self._rows(
            "SELECT message FROM events WHERE run_id = ? AND kind = ? ORDER BY id", (run_id, kind))]

    def revision_diff(self, run_id: str, seq: int, base_seq: int | None = None) -> str:
        return revision_diff(self._rows, run_id, seq, base_seq)

    def export_run(self, run_id: str, *, include_events: bool = True, include_samples: bool = True) -> dict:
        """Everything about a run (store/export.py); KeyError when there is no such run."""
        return export_run(self._rows, run_id, include_events=include_events, include_samples=include_samples)

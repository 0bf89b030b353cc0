"""Trust findings: the store's statements about them (a mixin of `Store`, like run_state.py).

A finding is evidence about how a run's scores were earned: the provenance of a submission's
weights, held-out items found in what the agent trained on, a decoy file read, an attempt on a
protected path. `severity` is `info` (recorded, not a flag), `warning` or `critical`."""

from __future__ import annotations

import time
from typing import Any

SEVERITIES = ("info", "warning", "critical")
FLAGGED = ("warning", "critical")


class FindingQueries:
    """Mixed into `Store`: relies on its primitives (insert, rows, one)."""

    def add_finding(self, run_id: str, kind: str, severity: str, summary: str, evidence: Any = None, *,
                    ts: float | None = None, submission_id: int | None = None) -> int:
        if severity not in SEVERITIES:
            raise ValueError(f"severity {severity!r}: one of {SEVERITIES}")
        return self.insert("findings", {"run_id": run_id, "submission_id": submission_id,
                                        "ts": time.time() if ts is None else ts, "kind": kind,
                                        "severity": severity, "summary": summary, "evidence": evidence})

    def findings(self, run_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        """The run's findings in time order (of one kind if given)."""
        if kind is None:
            return self.rows("findings", "SELECT * FROM findings WHERE run_id=? ORDER BY ts, id", (run_id,))
        return self.rows("findings", "SELECT * FROM findings WHERE run_id=? AND kind=? ORDER BY ts, id",
                         (run_id, kind))

    def has_finding(self, run_id: str, kind: str, key: str) -> bool:
        """Whether a finding of this kind whose summary starts with `key` is recorded (one per fact)."""
        return self.one("SELECT 1 AS x FROM findings WHERE run_id=? AND kind=? AND substr(summary, 1, ?)=?",
                        (run_id, kind, len(key), key)) is not None

    def revision_files(self, run_id: str) -> list[tuple[int, str, str]]:
        """(revision seq, path, blob sha256) of every file of every code revision of the run."""
        out = []
        for row in self.rows("revisions", "SELECT seq, manifest FROM revisions WHERE run_id=? ORDER BY seq", (run_id,)):
            for path, digest in sorted((row["manifest"] or {}).items()):
                out.append((row["seq"], path, digest))
        return out

    def events_of_kind(self, run_id: str, kind: str) -> list[dict[str, Any]]:
        return self.rows("events", "SELECT id, ts, kind, level, message, data FROM events WHERE run_id=? AND kind=? "
                                   "ORDER BY id", (run_id, kind))

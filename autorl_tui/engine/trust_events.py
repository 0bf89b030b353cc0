"""How a trust finding is reported: recorded in the store (findings table), logged as a `trust`
event of the run (which the console shows as a toast when it is a flag) — one call for every check."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autorl_tui.engine.run_journal import RunJournal

LEVEL = {"info": "info", "warning": "warning", "critical": "error"}


def report_finding(journal: "RunJournal", kind: str, severity: str, summary: str, evidence: Any = None, *,
                   ts: float | None = None, submission_id: int | None = None) -> int:
    fid = journal.store.add_finding(journal.run_id, kind, severity, summary, evidence, ts=ts,
                                    submission_id=submission_id)
    journal.log("trust", summary, level=LEVEL[severity],
                data={"finding_id": fid, "kind": kind, "severity": severity, "submission_id": submission_id})
    return fid

"""A run's live state (state, attempt, clock) and the one way to change it: every change is written
to the store and published on the bus, in that order (journal first: a change is on disk before the
action it describes). The supervisor, its submission desk, its grading and its finalization all
record through one journal."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from autorl_tui.engine import events as ev
from autorl_tui.run_states import FINAL_STATES
from autorl_tui.store.records import RunRecord, SubmissionRecord

if TYPE_CHECKING:
    from autorl_tui.engine.events import EventBus
    from autorl_tui.store.db import Store


class RunJournal:
    def __init__(self, store: "Store", bus: "EventBus", run: RunRecord):
        self.store = store
        self.bus = bus
        self.run = run          # the run's row as recorded: replaced (frozen) by every change below
        self.run_id: str = run.id
        self.state: str = run.state
        self.attempt: int = run.current_attempt or 0
        self.deadline: float | None = run.deadline
        self.started_at: float | None = run.started_at

    @property
    def budget_s(self) -> float:
        return float(self.run.budget_s)

    @property
    def seed(self) -> int:
        return int(self.run.seed)

    def log(self, kind: str, message: str, level: str = "info", data: Any = None) -> None:
        self.store.append_event(self.run_id, kind, message, level=level, data=data, attempt=self.attempt or None)
        self.bus.publish(ev.RunEventAppended(self.run_id, kind=kind, message=message, level=level, data=data))

    def log_lines(self, kind: str, messages: list[str], level: str = "info") -> None:
        """Many plain events of one kind at once (a batch of one stream's lines), as log() would
        record them one by one, with one timestamp: one store call and one publish for all."""
        if not messages:
            return
        ts, attempt = time.time(), self.attempt or None
        self.store.append_lines(self.run_id, attempt, ts, kind, level, messages)
        self.bus.publish_many(ev.RunEventAppended.lines(self.run_id, ts, kind, level, messages))

    def update_run(self, **fields) -> None:
        self.store.set_run_fields(self.run_id, fields)
        self.run = replace(self.run, **fields)
        self.bus.publish(ev.RunUpdated(self.run_id, fields=fields))

    def transition(self, state: str, reason: str | None = None, failure_source: str | None = None,
                   **fields) -> None:
        previous = self.state
        self.state = state
        fields = {"state": state, **fields}
        if failure_source:
            fields["failure_source"] = failure_source
        if state in FINAL_STATES:
            fields.setdefault("ended_at", time.time())
            fields.setdefault("end_reason", reason)
        self.store.set_run_fields(self.run_id, fields)
        self.run = replace(self.run, **fields)
        message = f"state {previous} → {state}" + (f": {reason}" if reason else "")
        self.store.append_event(self.run_id, "state", message, level="error" if state in ("failed", "lost") else "info",
                                data={"state": state, "previous": previous, "reason": reason,
                                      "failure_source": failure_source}, attempt=self.attempt or None)
        self.store.flush()
        self.bus.publish(ev.RunStateChanged(self.run_id, state=state, previous=previous, reason=reason,
                                            failure_source=failure_source))
        extra = {k: v for k, v in fields.items() if k != "state"}
        if extra:
            self.bus.publish(ev.RunUpdated(self.run_id, fields=extra))

    def set_submission(self, sub_id: int, **fields) -> SubmissionRecord:
        row = self.store.update_submission(sub_id, fields)
        self.bus.publish(ev.SubmissionUpdated(self.run_id, submission=row.to_dict()))
        return row

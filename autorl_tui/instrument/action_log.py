"""From an agent's stdout lines to the store: each normalized action becomes an event
(kind='action', message=one-line summary, data=the action dict) and usage actions are summed
onto the run (runs.tokens_in, tokens_out, cost_usd). The run supervisor feeds it every stdout
line of an attempt and calls `finish()` when stdout ends."""

from __future__ import annotations

from typing import Protocol

from autorl_tui.instrument.actions import Action, UsageTotals
from autorl_tui.instrument.parsers import get_parser

LEVELS = {"error": "error", "malformed": "warning"}


class _Store(Protocol):
    def append_event(self, run_id, kind, message, *, level="info", data=None, attempt=None, ts=None): ...
    def update(self, table, key, fields, key_column="id"): ...


class ActionRecorder:
    def __init__(self, store: _Store, run_id: str, attempt: int | None, output_format: str,
                 totals: UsageTotals | None = None):
        self.store = store
        self.run_id = run_id
        self.attempt = attempt
        self.parser = get_parser(output_format)
        # A later attempt of the same run continues the run's totals (pass them in).
        self.totals = totals or UsageTotals()
        self._dirty = False

    def _record(self, actions: list[Action], ts: float | None) -> list[Action]:
        for a in actions:
            self.store.append_event(self.run_id, "action", a.summary(), level=LEVELS.get(a.kind, "info"),
                                    data=a.to_dict(), attempt=self.attempt, ts=ts)
            self._dirty |= self.totals.add(a)
        return actions

    def feed(self, line: str, ts: float | None = None) -> list[Action]:
        """Parse one stdout line; records and returns its actions (for live display)."""
        return self._record(self.parser.feed(line), ts)

    def finish(self) -> list[Action]:
        actions = self._record(self.parser.finish(), None)
        self.flush_totals()
        return actions

    def flush_totals(self) -> dict | None:
        """Write the usage totals onto the run if they changed; returns the fields written."""
        if not self._dirty:
            return None
        fields = self.totals.run_fields()
        self.store.set_run_fields(self.run_id, fields)
        self._dirty = False
        return fields

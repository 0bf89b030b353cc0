"""Attempts on protected things, found at the end of a run in what the engine recorded: submissions
refused because they led outside output/, and agent actions that name a protected path. The events
are written as the engine writes them (the desk's refusal log, the action recorder's rows) into a
real store."""

from __future__ import annotations

import asyncio

from autorl_tui.engine import trust_sweep
from autorl_tui.engine.events import EventBus
from autorl_tui.engine.run_journal import RunJournal
from autorl_tui.store.db import Store
from autorl_tui.store.records import RunRecord


def test_outside_output_submissions_and_actions_on_protected_paths_become_findings(tmp_path):
    store = Store(tmp_path / "store.db")
    journal = RunJournal(store, EventBus(), RunRecord(id="run-p", task="arith", agent="a", model="tiny",
                                                      state="finalizing", budget_s=60, created_at=0.0))
    home = tmp_path / "home"
    held_out = tmp_path / "cache" / "arith" / "test.jsonl"
    journal.log("submission", "submission 1 rejected: '../models/x' is outside output/", level="warning",
                data={"submission_id": 1, "code": "outside_output"})
    journal.log("submission", "submission 2 rejected: output/v2 has no config.json", level="warning",
                data={"submission_id": 2, "code": "missing_config"})
    journal.log("action", f"shell: cat {held_out}", data={"kind": "shell", "command": f"cat {held_out}"})
    journal.log("action", "shell: ls code/", data={"kind": "shell", "command": "ls code/"})
    journal.log("action", f"read_file {home / 'store.db'}", data={"kind": "file_read", "path": str(home / "store.db")})
    store.flush()
    asyncio.run(trust_sweep.sweep(journal, {"test": str(held_out)}, None, [home / "store.db"]))
    found = store.findings("run-p", "protected_path")
    assert [(f["severity"], f["evidence"].get("code") or f["evidence"].get("path")) for f in found] == [
        ("warning", "outside_output"), ("critical", str(held_out)), ("critical", str(home / "store.db"))]
    assert store.findings("run-p", "sweep") == []           # the sweep itself ran cleanly

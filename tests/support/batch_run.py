"""Reading back the one run a `--batch` plan made (tests of AutoRL-Bench agent folders)."""

import sqlite3
from pathlib import Path


def the_done_run(home: Path, proc):
    """(read-only store connection, the run row, its workspace): asserts the batch exited 0 and
    the run ended `done`, showing the tail of the folder's agent.log when not."""
    db = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    run = dict(db.execute("SELECT * FROM runs").fetchone())
    ws = Path(run["workspace"])
    log = (ws / "agent.log").read_text() if (ws / "agent.log").exists() else "(no agent.log)"
    assert proc.returncode == 0 and run["state"] == "done", (run["end_reason"], log[-3000:], proc.stderr[-2000:])
    return db, run, ws

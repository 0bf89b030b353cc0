"""The console's snapshot of the runs: summaries (no spec: a run's spec comes with its history),
read a page at a time, each with a digest of its content so that a console re-attaching sends
the digests it holds and gets back only the runs that changed (docs/console.md, "Detaching,
re-attaching").

A page is `page_size` runs, newest first, after the cursor of the previous page; the answer says
how many runs the page held unchanged and gives the cursor of the next page (None after the last)
and the number of runs in the home (a console whose count differs after the last page reloads
everything). A re-attaching console first sends one hash of the rows it holds for a page
(`known_hash`); only a page whose hash differs costs the digests of its runs. On the wire a
page names its columns once and sends each run as a list of values; EngineClient.snapshot turns
them back into one dict per run."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from autorl_tui.run_states import ACTIVE_STATES

SPARK_POINTS = 16      # dev scores per run: what the Runs table's trend column draws


def digest(row: dict) -> str:
    return hashlib.blake2b(json.dumps(row, sort_keys=True, default=str, separators=(",", ":")).encode(),
                           digest_size=8).hexdigest()


def page_hash(pairs: list[tuple[str, str]]) -> str:
    """One hash of a page's (run id, digest) pairs in page order: a console holding exactly these
    rows sends it instead of every digest (16 bytes for a page of 500 runs, not 23 kB)."""
    return hashlib.blake2b("\n".join(f"{rid}\0{dig}" for rid, dig in pairs).encode(), digest_size=8).hexdigest()


def summary_page(store: Any, *, page_size: int | None = None, after: list | None = None,
                 known: dict[str, str] | None = None, known_hash: str | None = None) -> dict:
    if page_size is not None and (not isinstance(page_size, int) or page_size < 1):
        raise ValueError(f"page_size must be a positive integer, not {page_size!r}")
    cursor = (float(after[0]), str(after[1])) if after else None
    rows = store.run_summaries(limit=None if page_size is None else page_size + 1, after=cursor)
    more = page_size is not None and len(rows) > page_size      # one row more says whether a next page exists
    rows = rows[:page_size]
    scores = store.recent_dev_scores([r["id"] for r in rows], SPARK_POINTS)
    known = known or {}
    changed, unchanged = [], 0
    for run in rows:
        if run.get("state") in ACTIVE_STATES:      # liveness: when the newest event was written
            run["last_event_at"] = store.last_event_at(run["id"])
            run["step"] = store.last_step(run["id"])
        run["dev_scores"] = [list(p) for p in scores.get(run["id"], ())]
        run["digest"] = digest(run)
    page_next = [rows[-1]["created_at"], rows[-1]["id"]] if more else None
    if known_hash is not None:
        # The caller's rows for this page, hashed: equal, nothing to send; else it asks again with
        # each run's digest (`digests_needed`), and gets only the changed runs.
        same = known_hash == page_hash([(r["id"], r["digest"]) for r in rows])
        return {"columns": [], "rows": [], "unchanged": len(rows) if same else 0, "digests_needed": not same,
                "next": page_next, "total": store.count_runs()}
    for run in rows:
        if known.get(run["id"]) == run["digest"]:
            unchanged += 1
        else:
            changed.append(run)
    columns = list(dict.fromkeys(k for run in changed for k in run))
    return {"columns": columns, "rows": [[run.get(c) for c in columns] for run in changed],
            "unchanged": unchanged, "next": page_next, "total": store.count_runs()}


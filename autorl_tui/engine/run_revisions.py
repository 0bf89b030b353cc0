"""A run's code revisions as the journal records them: a tracker that continues from the last
stored manifest, and a snapshot stored as a numbered revision (taken periodically while the agent
works, and with each submission)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING

from autorl_tui.instrument.revisions import RevisionTracker

if TYPE_CHECKING:
    from autorl_tui.engine.run_journal import RunJournal


def revision_tracker(journal: "RunJournal", code_dir: Path) -> RevisionTracker:
    return RevisionTracker(code_dir, last_manifest=journal.store.last_revision_manifest(journal.run_id))


async def snapshot_revision(journal: "RunJournal", tracker: RevisionTracker, reason: str) -> int | None:
    """Store a revision if the code changed; the id of the run's latest revision either way."""
    store = journal.store
    result = await asyncio.to_thread(tracker.snapshot, store.put_blob)
    if result is None:
        return store.last_revision_id(journal.run_id)
    manifest, skipped, total = result
    rev_id, seq = store.add_revision(journal.run_id, ts=time.time(), reason=reason, manifest=manifest,
                                     total_bytes=total, skipped=skipped)
    journal.log("revision", f"code revision {seq}: {len(manifest)} files ({reason})",
                data={"revision_id": rev_id, "seq": seq, "files": sorted(manifest)[:50]})
    return rev_id

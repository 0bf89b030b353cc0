"""Which submission snapshots an ended run keeps, and reclaiming the rest (`autorl-tui runs prune`).

Kept: the selected submission (the run's `best_submission_id`, the one scored on test), the best
on dev, and the last N by sequence. Every submission keeps its content hash in the store, and a
pruned snapshot's per-file hashes are appended to `pruned.json` beside the snapshots, so what was
graded stays provable after its bytes are gone. Snapshot files are hard links to the run's blob
store (`grading_host/submissions.py`); a blob is freed when no kept snapshot links to it any more.

A copy into the blob store is written under an INCOMING name until it is hashed; a crash mid-copy
(or before the hash) leaves it behind. Such an orphan is removed when it was made before
`incoming_before`: the start of the engine that holds the home, or the start of the prune when no
engine does. A copy an alive engine is writing was made after that engine started, so it is never
touched (a snapshot that links it keeps its bytes: only the blob store's name goes). A snapshot
folder is made under a PARTIAL name (`NNN.partial`) and renamed once whole; one a crash left is
removed by the same rule (its folder's ctime), and the blobs only it linked go with it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from autorl_tui.grading_host.submissions import BLOBS, INCOMING, PARTIAL

DEFAULT_KEEP_LAST = 3
# The kernel stamps ctime from a coarse clock (up to a tick behind time.time()): a copy counts as
# made before a moment only when its ctime is this much earlier.
CTIME_SLACK_S = 1.0


@dataclass
class RunPrune:
    run_id: str
    keep: list[int] = field(default_factory=list)          # seqs kept
    drop: list[int] = field(default_factory=list)          # seqs whose snapshot goes
    freed_bytes: int = 0
    orphans: list[str] = field(default_factory=list)       # INCOMING blobs a crashed copy left (their names)
    partials: list[str] = field(default_factory=list)      # PARTIAL snapshot folders a crash left (their names)


def choose(run: dict, submissions: list[dict], keep_last: int) -> tuple[list[int], list[int]]:
    """(kept seqs, dropped seqs) among the submissions that have a snapshot."""
    with_snap = [s for s in submissions if s.get("snapshot_path")]
    keep: set[int] = set()
    for s in with_snap:
        if s["id"] == run.get("best_submission_id"):
            keep.add(s["seq"])
    scored = [s for s in with_snap if s.get("status") == "scored" and s.get("score") is not None]
    if scored:
        keep.add(max(scored, key=lambda s: (s["score"], -s["seq"]))["seq"])
    keep.update(sorted(s["seq"] for s in with_snap)[-keep_last:] if keep_last > 0 else [])
    drop = sorted(s["seq"] for s in with_snap if s["seq"] not in keep)
    return sorted(keep), drop


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def orphaned_copies(snap_root: Path, incoming_before: float | None) -> list[Path]:
    """The INCOMING blobs of the run made before `incoming_before` (their ctime, which only the
    kernel sets: a copy being written, or written by the engine now alive, is younger); none when
    it is None (an engine holds the home and its start is unknown)."""
    return _made_before(snap_root / BLOBS, INCOMING + "*", Path.is_file, incoming_before)


def orphaned_partials(snap_root: Path, incoming_before: float | None) -> list[Path]:
    """The PARTIAL snapshot folders of the run made before `incoming_before` (by the same rule)."""
    return _made_before(snap_root, "*" + PARTIAL, Path.is_dir, incoming_before)


def _made_before(folder: Path, pattern: str, kind, incoming_before: float | None) -> list[Path]:
    if incoming_before is None or not folder.is_dir():
        return []
    return sorted(p for p in folder.glob(pattern)
                  if kind(p) and not p.is_symlink() and p.stat().st_ctime < incoming_before - CTIME_SLACK_S)


def plan_run(snap_root: Path, run: dict, submissions: list[dict], keep_last: int,
             incoming_before: float | None = None) -> RunPrune:
    keep, drop = choose(run, submissions, keep_last)
    plan = RunPrune(run_id=run["id"], keep=keep, drop=[s for s in drop if (snap_root / f"{s:03d}").is_dir()])
    for p in orphaned_copies(snap_root, incoming_before):
        st = p.stat()
        plan.orphans.append(p.name)
        plan.freed_bytes += st.st_size if st.st_nlink == 1 else 0
    plan.partials = [p.name for p in orphaned_partials(snap_root, incoming_before)]
    # A file's bytes are freed when every link to its inode, but the blob store's own, goes.
    going: dict[int, int] = {}
    sizes: dict[int, tuple[int, int]] = {}
    for folder in [snap_root / f"{seq:03d}" for seq in plan.drop] + [snap_root / n for n in plan.partials]:
        for p in _files(folder):
            st = p.stat()
            going[st.st_ino] = going.get(st.st_ino, 0) + 1
            sizes[st.st_ino] = (st.st_nlink, st.st_size)
    has_blobs = (snap_root / BLOBS).is_dir()
    for ino, n in going.items():
        nlink, size = sizes[ino]
        if nlink - n <= (1 if has_blobs else 0):
            plan.freed_bytes += size
    return plan


def apply(snap_root: Path, plan: RunPrune) -> None:
    """Remove the dropped snapshots (their file hashes recorded first) and the planned partial
    snapshots, then the orphaned blobs and the planned orphaned copies."""
    for name in plan.orphans:
        (snap_root / BLOBS / name).unlink(missing_ok=True)
    for name in plan.partials:
        shutil.rmtree(snap_root / name, ignore_errors=True)
    if not plan.drop and not plan.partials:
        return
    record = snap_root / "pruned.json"
    try:
        pruned = json.loads(record.read_text()) if record.exists() else {}
    except ValueError:
        pruned = {}
    blobs = snap_root / BLOBS
    by_inode = {p.stat().st_ino: p.name for p in _files(blobs)} if blobs.is_dir() else {}
    for seq in plan.drop:
        folder = snap_root / f"{seq:03d}"
        pruned[str(seq)] = {str(p.relative_to(folder)): by_inode.get(p.stat().st_ino) or _sha256(p)
                            for p in _files(folder)}
    if plan.drop:
        tmp = record.with_name(".pruned.json.tmp")
        tmp.write_text(json.dumps(pruned, indent=1, sort_keys=True))
        os.replace(tmp, record)
    for seq in plan.drop:
        shutil.rmtree(snap_root / f"{seq:03d}")
    if blobs.is_dir():
        for p in _files(blobs):
            if p.stat().st_nlink == 1 and not p.name.startswith(INCOMING):
                p.unlink()


def _sha256(p: Path) -> str:
    """A file's content hash, for snapshots taken before the blob store."""
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        while chunk := fh.read(8 << 20):
            h.update(chunk)
    return h.hexdigest()

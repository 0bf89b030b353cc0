"""Snapshots in one pass (issue 36), end to end: a big submission does not hold up the run's next
small one. The real engine and grading API; the test agent (tests/agents/big_then_small.py)
submits a big folder (8,000 files and a 300 MiB file) and, once the harness has begun copying it,
a small one. The small one's snapshot is in place before the big one's (event order, not time),
both are graded, and the big one (more than EARLY_GRADING_BYTES to hash) is hashed beside its
grading, its content hash recorded all the same."""

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from autorl_tui.engine.submission_desk import EARLY_GRADING_BYTES
from tests.support.harness import TASKS, TEST_AGENTS, cli, home_with_tiny, write_plan

pytestmark = pytest.mark.slow


@pytest.fixture
def home(tiny_model_dir):
    yield from home_with_tiny(tiny_model_dir)


def _tree_hash(folder: Path) -> str:
    outer = hashlib.sha256()
    for p in sorted((p for p in folder.rglob("*") if p.is_file()), key=lambda p: p.relative_to(folder).parts):
        outer.update(f"{p.relative_to(folder).as_posix()}\0{hashlib.sha256(p.read_bytes()).hexdigest()}\n".encode())
    return outer.hexdigest()


def test_a_big_submission_does_not_hold_up_the_next_small_one(home, tmp_path):
    big_mb = 300
    assert big_mb << 20 > EARLY_GRADING_BYTES
    plan = write_plan(tmp_path / "plan.yaml", agents=["test-big-then-small"], budget="300s")
    proc = cli("--agents-dir", str(TEST_AGENTS), "--tasks-dir", str(TASKS), "--plain", "--batch", str(plan),
               home=home, timeout=900, env={"BIG_FILES": "8000", "BIG_MB": str(big_mb)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    db = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    run = dict(db.execute("SELECT * FROM runs").fetchone())
    subs = {r["path"]: dict(r) for r in db.execute("SELECT * FROM submissions WHERE run_id=?", (run["id"],))}
    events = [dict(r) for r in db.execute("SELECT id, kind, message, data FROM events WHERE run_id=? ORDER BY id",
                                          (run["id"],))]
    db.close()
    stdout = [e["message"] for e in events if e["kind"] == "stdout"]
    assert "big copy started: True" in stdout, stdout
    big, small = subs["output/big"], subs["output/small"]
    assert (big["seq"], small["seq"]) == (1, 2)          # the big one came first
    snapshot_taken = {json.loads(e["data"])["seq"]: e["id"] for e in events
                      if e["kind"] == "submission" and json.loads(e["data"] or "{}").get("phase") == "snapshot"}
    assert snapshot_taken[2] < snapshot_taken[1], "the small submission's snapshot waited for the big one's copy"
    answers = {m.split(":", 1)[0].split()[1]: json.loads(m.split(": ", 1)[1]) for m in stdout
               if m.startswith("answer ")}
    assert answers["small"]["http"] == answers["big"]["http"] == 200, answers
    assert big["status"] == small["status"] == "scored"
    # The big one was graded from its copy while the copy was hashed; the hash is the snapshot's.
    assert big["content_hash"] == _tree_hash(Path(big["snapshot_path"]))
    assert small["content_hash"] == _tree_hash(Path(small["snapshot_path"]))
    hashed = [e for e in events if json.loads(e["data"] or "{}").get("phase") == "hashed"]
    assert [json.loads(e["data"])["seq"] for e in hashed] == [1]
    blobs = Path(big["snapshot_path"]).parent / ".blobs"
    assert not list(blobs.glob(".incoming-*"))           # every copy filed under its hash

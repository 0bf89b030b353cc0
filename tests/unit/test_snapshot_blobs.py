"""Snapshots share unchanged files through the run's blob store, and `runs prune` reclaims the
snapshots an ended run no longer needs (issue 18)."""

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from autorl_tui.grading_host.submissions import BLOBS, snapshot_folder
from autorl_tui.home import Home
from autorl_tui.store.db import Store
from tests.support.harness import cli


def _model(folder: Path, weights: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "sub").mkdir(exist_ok=True)
    (folder / "sub" / "tokenizer.json").write_text("{}")
    return folder


def _expected_hash(folder: Path) -> str:
    outer = hashlib.sha256()
    for p in sorted(q for q in folder.rglob("*") if q.is_file()):
        outer.update(f"{p.relative_to(folder)}\0{hashlib.sha256(p.read_bytes()).hexdigest()}\n".encode())
    return outer.hexdigest()


def test_unchanged_files_are_links_to_one_blob_and_changed_ones_are_copied(tmp_path):
    src = _model(tmp_path / "out" / "v1", os.urandom(3 << 20))
    snaps = tmp_path / "snapshots" / "r1"
    first = snapshot_folder(src, snaps / "001", 1 << 30)
    second = snapshot_folder(src, snaps / "002", 1 << 30)          # resubmitted as is
    assert first.content_hash == second.content_hash == _expected_hash(src)
    assert first.n_files == 3 and first.total_bytes == second.total_bytes
    for rel in ("config.json", "model.safetensors", "sub/tokenizer.json"):
        a, b = (snaps / "001" / rel).stat(), (snaps / "002" / rel).stat()
        assert a.st_ino == b.st_ino and a.st_mode & 0o777 == 0o444
    (src / "model.safetensors").write_bytes(os.urandom(3 << 20))   # a new checkpoint, same tokenizer and config
    third = snapshot_folder(src, snaps / "003", 1 << 30)
    assert third.content_hash == _expected_hash(src) != first.content_hash
    assert (snaps / "003" / "model.safetensors").read_bytes() == (src / "model.safetensors").read_bytes()
    assert (snaps / "003" / "model.safetensors").stat().st_ino != (snaps / "001" / "model.safetensors").stat().st_ino
    assert (snaps / "003" / "config.json").stat().st_ino == (snaps / "001" / "config.json").stat().st_ino
    assert len([p for p in (snaps / BLOBS).rglob("*") if p.is_file()]) == 4
    assert not list((snaps / BLOBS).rglob(".incoming-*"))


def _home_with_run(tmp_path, state="done"):
    home = Home.open(tmp_path / "home", create=True)
    store = Store(home.store_path)
    now = time.time()
    store.insert("runs", {"id": "r0001-x", "task": "arith", "agent": "a", "model": "tiny", "budget_s": 60,
                          "state": state, "created_at": now, "spec": "{}"})
    snaps = home.snapshots / "r0001-x"
    src = tmp_path / "out"
    scores = {1: 10.0, 2: 40.0, 3: 20.0, 4: 15.0, 5: 12.0, 6: 11.0}
    ids = {}
    for seq, score in scores.items():
        _model(src, os.urandom(1 << 20) if seq != 4 else (snaps / "002" / "model.safetensors").read_bytes())
        snap = snapshot_folder(src, snaps / f"{seq:03d}", 1 << 30)
        ids[seq] = store.insert("submissions", {"run_id": "r0001-x", "seq": seq, "path": "output/v", "received_at": now,
                                                "snapshot_path": str(snap.path), "content_hash": snap.content_hash,
                                                "status": "scored", "score": score})
    store.update("runs", "r0001-x", {"best_submission_id": ids[3]})
    store.flush()
    store.close()
    return home, snaps


@pytest.mark.subprocess
def test_runs_prune_keeps_selected_best_and_last_and_frees_orphan_blobs(tmp_path):
    home, snaps = _home_with_run(tmp_path)
    before = sorted(p.name for p in snaps.iterdir())
    dry = cli("runs", "prune", "--keep-last", "2", "--dry-run", "--json", home=home.root)
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    [run] = plan["runs"]
    assert run["keep"] == [2, 3, 5, 6] and run["drop"] == [1, 4]   # best 2, selected 3, last two
    # Snapshot 4 shares its weights with the kept 2: only snapshot 1's weights (1 MiB) are freed.
    assert (1 << 20) <= run["freed_bytes"] < (1 << 20) + 4096
    assert sorted(p.name for p in snaps.iterdir()) == before                 # a dry run deletes nothing
    done = cli("runs", "prune", "--keep-last", "2", home=home.root)
    assert done.returncode == 0, done.stderr
    assert "deleted 2 snapshot(s)" in done.stdout
    assert not (snaps / "001").exists() and not (snaps / "004").exists()
    assert (snaps / "002" / "model.safetensors").exists() and (snaps / "006").is_dir()
    pruned = json.loads((snaps / "pruned.json").read_text())
    assert set(pruned) == {"1", "4"} and len(pruned["1"]["model.safetensors"]) == 64
    assert pruned["4"]["model.safetensors"] == hashlib.sha256((snaps / "002" / "model.safetensors").read_bytes()).hexdigest()
    blobs = [p for p in (snaps / BLOBS).rglob("*") if p.is_file()]
    assert all(p.stat().st_nlink > 1 for p in blobs)                        # no orphan left


@pytest.mark.subprocess
def test_runs_prune_refuses_bad_input_with_clear_errors(tmp_path):
    home, snaps = _home_with_run(tmp_path, state="running")
    active = cli("runs", "prune", "r0001-x", home=home.root)
    assert active.returncode == 2 and "has not ended" in active.stderr and "Traceback" not in active.stderr
    unknown = cli("runs", "prune", "r9999-nope", home=home.root)
    assert unknown.returncode == 2 and "no run r9999-nope" in unknown.stderr
    negative = cli("runs", "prune", "--keep-last", "-1", home=home.root)
    assert negative.returncode == 2 and "--keep-last" in negative.stderr
    assert (snaps / "001").is_dir()                                          # nothing touched
    everything = cli("runs", "prune", home=home.root)                        # ended runs only: none here
    assert everything.returncode == 0 and "0 snapshot(s) of 0 run(s)" in everything.stdout


def test_a_file_rewritten_with_the_same_size_and_mtime_is_hashed_again(tmp_path, monkeypatch):
    from autorl_tui.grading_host import submissions

    monkeypatch.setattr(submissions, "RACY_NS", 0)          # trust the recorded stat as soon as it is written
    src = _model(tmp_path / "out" / "v1", os.urandom(1 << 20))
    snaps = tmp_path / "snapshots" / "r1"
    first = snapshot_folder(src, snaps / "001", 1 << 30)
    assert json.loads((snaps / submissions.STAT_CACHE).read_text())            # stats recorded
    again = snapshot_folder(src, snaps / "002", 1 << 30)                        # unchanged: from the record
    assert again.content_hash == first.content_hash == _expected_hash(src)
    weights = src / "model.safetensors"
    old = weights.stat()
    weights.write_bytes(os.urandom(1 << 20))                                    # same size...
    os.utime(weights, ns=(old.st_atime_ns, old.st_mtime_ns))                    # ...and the old mtime back
    third = snapshot_folder(src, snaps / "003", 1 << 30)                        # ctime moved: hashed again
    assert third.content_hash == _expected_hash(src) != first.content_hash
    assert (snaps / "003" / "model.safetensors").read_bytes() == weights.read_bytes()


def test_a_snapshot_is_in_place_before_its_hash_and_hashing_files_the_copies(tmp_path, monkeypatch):
    from autorl_tui.grading_host import submissions

    monkeypatch.setattr(submissions, "RACY_NS", 0)
    src = _model(tmp_path / "out" / "v1", os.urandom(2 << 20))
    snaps = tmp_path / "snapshots" / "r1"
    snap = snapshot_folder(src, snaps / "001", 1 << 30, defer_hash_over=0)
    # The copy is in place (what the grading reads) before anything is hashed.
    assert snap.content_hash is None and snap.unhashed_bytes == snap.total_bytes
    assert (snaps / "001" / "model.safetensors").read_bytes() == (src / "model.safetensors").read_bytes()
    assert len(list((snaps / BLOBS).glob(".incoming-*"))) == 3
    assert submissions.hash_snapshot(snap) == _expected_hash(src) == submissions.hash_snapshot_folder(snaps / "001")
    assert not list((snaps / BLOBS).glob(".incoming-*"))
    # Each copy became its content's blob, and the run knows the files now: nothing to hash next time.
    again = snapshot_folder(src, snaps / "002", 1 << 30, defer_hash_over=0)
    assert again.content_hash == snap.content_hash and again.unhashed_bytes == 0
    for rel in ("config.json", "model.safetensors", "sub/tokenizer.json"):
        assert (snaps / "001" / rel).stat().st_ino == (snaps / "002" / rel).stat().st_ino


def test_snapshots_of_one_run_taken_at_once_keep_both_stat_records(tmp_path, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from autorl_tui.grading_host import submissions

    monkeypatch.setattr(submissions, "RACY_NS", 0)
    folders = [_model(tmp_path / "out" / f"v{i}", os.urandom(1 << 20)) for i in range(4)]
    snaps = tmp_path / "snapshots" / "r1"
    with ThreadPoolExecutor(4) as pool:
        taken = list(pool.map(lambda i: snapshot_folder(folders[i], snaps / f"{i:03d}", 1 << 30), range(4)))
    assert [s.content_hash for s in taken] == [_expected_hash(f) for f in folders]
    recorded = json.loads((snaps / submissions.STAT_CACHE).read_text())
    assert {key.split("/")[-2] for key in recorded} >= {"v0", "v1", "v2", "v3"}, recorded


def _wait_past(path: Path, slack: float) -> None:
    """Until the clock is past path's ctime by more than slack (the coarse-clock margin)."""
    deadline = path.stat().st_ctime + slack
    while time.time() <= deadline + 0.05:
        time.sleep(0.05)


@pytest.mark.subprocess
def test_runs_prune_removes_copies_a_crash_left_never_one_an_alive_engine_is_writing(tmp_path):
    """A crash mid-copy leaves an `.incoming-*` blob. `runs prune` removes it when it is older than
    the engine that holds the home (here the test holds the real engine lock), and keeps the copy
    that engine made since; once no engine holds the home, that one goes too."""
    from autorl_tui.grading_host.snapshot_retention import CTIME_SLACK_S
    from autorl_tui.grading_host.submissions import INCOMING
    from autorl_tui.home import EngineLock

    home, snaps = _home_with_run(tmp_path)
    old = snaps / BLOBS / f"{INCOMING}crashed"
    old.write_bytes(os.urandom(1 << 20))
    _wait_past(old, CTIME_SLACK_S)
    lock = EngineLock(home)
    lock.acquire(role="test")
    try:
        alive = snaps / BLOBS / f"{INCOMING}being-copied"
        alive.write_bytes(b"half a checkpoint")
        dry = cli("runs", "prune", "--keep-last", "9", "--dry-run", "--json", home=home.root)
        assert dry.returncode == 0, dry.stderr
        [run] = json.loads(dry.stdout)["runs"]
        assert run["orphans"] == [old.name] and run["drop"] == [] and run["freed_bytes"] == 1 << 20
        assert old.exists()                                                   # a dry run deletes nothing
        done = cli("runs", "prune", "--keep-last", "9", home=home.root)
        assert done.returncode == 0, done.stderr
        assert "deleted 1 partial copy an interrupted snapshot left" in done.stdout
        assert not old.exists() and alive.read_bytes() == b"half a checkpoint"
        assert all((snaps / f"{seq:03d}").is_dir() for seq in range(1, 7))    # no snapshot touched
    finally:
        lock.release()
    _wait_past(alive, CTIME_SLACK_S)
    after = cli("runs", "prune", "--keep-last", "9", "--json", home=home.root)
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout)["runs"][0]["orphans"] == [alive.name] and not alive.exists()


@pytest.mark.subprocess
def test_runs_prune_removes_a_half_made_snapshot_a_crash_left_never_one_being_made(tmp_path):
    """An intake that dies before its snapshot folder is renamed into place leaves `NNN.partial`
    (with links into the blob store). `runs prune` removes one older than the engine holding the
    home, with the blobs only it linked, and keeps one that engine is making; no snapshot and no
    pruned.json entry is touched."""
    from autorl_tui.grading_host.snapshot_retention import CTIME_SLACK_S
    from autorl_tui.grading_host.submissions import PARTIAL
    from autorl_tui.home import EngineLock

    home, snaps = _home_with_run(tmp_path)

    def half_made(seq: int, weights: bytes) -> Path:
        made = snapshot_folder(_model(tmp_path / f"out{seq}", weights), snaps / f"{seq:03d}", 1 << 30).path
        return made.rename(made.with_name(made.name + PARTIAL))    # as if the rename into place never came

    crashed = half_made(7, os.urandom(1 << 20))
    weights = (crashed / "model.safetensors").stat().st_ino      # its other files are the other snapshots' too
    _wait_past(crashed, CTIME_SLACK_S)
    lock = EngineLock(home)
    lock.acquire(role="test")
    try:
        being_made = half_made(8, os.urandom(4096))
        dry = cli("runs", "prune", "--keep-last", "9", "--dry-run", "--json", home=home.root)
        assert dry.returncode == 0, dry.stderr
        [run] = json.loads(dry.stdout)["runs"]
        assert run["partials"] == [crashed.name] and run["drop"] == [], run
        assert (1 << 20) <= run["freed_bytes"] < (1 << 20) + 4096, run          # its weights' blob only it links
        assert crashed.is_dir()                                               # a dry run deletes nothing
        done = cli("runs", "prune", "--keep-last", "9", home=home.root)
        assert done.returncode == 0, done.stderr
        assert f"deleted 1 half-made snapshot folder(s) an interrupted intake left: {crashed.name}" in done.stdout
        assert not crashed.exists() and being_made.is_dir()
        left = {p.stat().st_ino for p in (snaps / BLOBS).rglob("*") if p.is_file()}
        assert weights not in left                                           # the blob only it linked went with it
        assert all(p.stat().st_nlink > 1 for p in (snaps / BLOBS).rglob("*") if p.is_file())
        assert all((snaps / f"{seq:03d}" / "model.safetensors").exists() for seq in range(1, 7))
        assert not (snaps / "pruned.json").exists()
    finally:
        lock.release()

"""Where the store lives (store_location.py) and the filesystem check that keeps it off network
filesystems (filesystems.py): the real statfs(2) of this machine's folders, and NFS simulated with
AUTORL_TEST_NETWORK_FS (docs/settings.md)."""
import json
import subprocess

import pytest

from autorl_tui import filesystems, store_location
from autorl_tui.exitcodes import UsageError
from autorl_tui.home import EngineLock, Home
from autorl_tui.store_location import StoreLocation


@pytest.mark.subprocess
def test_probe_reads_the_kernels_filesystem_type(tmp_path):
    info = filesystems.probe(tmp_path / "not" / "yet")           # a path not created: its nearest folder
    assert info.path == tmp_path
    by_stat = subprocess.run(["stat", "-f", "-c", "%t", str(tmp_path)], capture_output=True, text=True, check=True)
    assert info.f_type == int(by_stat.stdout.strip(), 16)
    assert not info.network and not info.simulated


def test_a_folder_named_in_the_override_is_reported_as_nfs_and_nothing_else_is(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTORL_TEST_NETWORK_FS", str(tmp_path / "nfs"))
    inside = filesystems.probe(tmp_path / "nfs" / "home" / "store.db")
    assert (inside.name, inside.f_type, inside.network, inside.simulated) == ("nfs", 0x6969, True, True)
    assert "network" in inside.describe() and "0x6969" in inside.describe()
    assert not filesystems.probe(tmp_path / "nfs-not").network     # a sibling with the same prefix is not inside


def test_the_known_network_types_are_network_and_local_ones_are_not():
    for f_type in (0x6969, 0xFF534D42, 0xFE534D42, 0x0BD00BD0, 0x47504653, 0x00C36400, 0x01021997):
        assert filesystems.KNOWN[f_type][1], hex(f_type)
    for f_type in (0xEF53, 0x58465342, 0x9123683E, 0x01021994, 0x794C7630):
        assert not filesystems.KNOWN[f_type][1], hex(f_type)


def test_without_a_request_or_record_the_store_is_in_the_home(tmp_path):
    loc = store_location.resolve(tmp_path / "home", None)
    assert loc == StoreLocation(tmp_path / "home" / "store.db") and loc.here()


def test_a_requested_store_is_recorded_and_found_again_without_the_flag(tmp_path):
    root = tmp_path / "home"
    root.mkdir()
    loc = store_location.resolve(root, str(tmp_path / "local") + "/")     # a folder: store.db inside it
    assert loc.path == tmp_path / "local" / "store.db" and loc.recorded and loc.here()
    assert not (root / "store.location").exists()                           # resolving writes nothing
    store_location.record(root, loc)
    assert json.loads((root / "store.location").read_text())["store"] == str(loc.path)
    assert store_location.resolve(root, None) == loc
    assert store_location.resolve(root, str(loc.path)) == loc                # the same path again: fine
    assert list(root.iterdir()) == [root / "store.location"]                 # no temporary file left


def test_a_request_naming_another_store_than_the_record_is_a_usage_error(tmp_path):
    root = tmp_path / "home"
    root.mkdir()
    store_location.record(root, store_location.resolve(root, str(tmp_path / "a.db")))
    with pytest.raises(UsageError) as err:
        store_location.resolve(root, str(tmp_path / "b.db"))
    said = str(err.value)
    assert str(tmp_path / "a.db") in said and str(tmp_path / "b.db") in said and "leave --store out" in said
    assert not (tmp_path / "b.db").exists()


def test_a_store_already_in_the_home_is_not_silently_replaced_by_another(tmp_path):
    root = tmp_path / "home"
    root.mkdir()
    (root / "store.db").write_bytes(b"")
    with pytest.raises(UsageError, match="keeps its store inside it"):
        store_location.resolve(root, str(tmp_path / "elsewhere.db"))
    assert store_location.resolve(root, str(root / "store.db")) == StoreLocation(root / "store.db")


def test_a_store_recorded_by_another_machine_is_refused_to_readers_and_writers(tmp_path):
    root = tmp_path / "home"
    (root / "runs").mkdir(parents=True)
    other = StoreLocation(tmp_path / "s.db", recorded=True, host="node-b", machine_id="0" * 32)
    store_location.record(root, other)
    home = Home(root)
    assert not home.store.here()
    for opening in (lambda: home.store_path, home.writer_store_path):
        with pytest.raises(UsageError) as err:
            opening()
        assert "lives on the engine's machine node-b" in str(err.value)
        assert "unix socket" in str(err.value)


def test_a_writer_refuses_a_missing_recorded_store_while_the_home_holds_runs(tmp_path):
    root = tmp_path / "home"
    (root / "runs").mkdir(parents=True)
    store_location.record(root, store_location.resolve(root, str(tmp_path / "s.db")))
    assert Home(root).writer_store_path() == tmp_path / "s.db"            # no runs yet: a new store is fine
    with pytest.raises(UsageError, match="no store at"):
        assert Home(root).store_path is None                                # a reader is told it is missing
    (root / "runs" / "r0001").mkdir()
    with pytest.raises(UsageError, match="is missing, but home"):
        Home(root).writer_store_path()


def test_a_store_on_a_network_filesystem_is_refused_naming_the_flag(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTORL_TEST_NETWORK_FS", str(tmp_path / "nfs"))
    home = Home.open(str(tmp_path / "nfs" / "home"))            # a home on NFS may hold everything else
    with pytest.raises(UsageError) as err:
        home.writer_store_path()
    said = str(err.value)
    assert "network filesystem" in said and "nfs" in said and "--store /var/tmp/autorl-tui/" in said
    assert not (tmp_path / "nfs" / "home" / "store.db").exists()
    # naming a store on NFS is refused before anything is written
    with pytest.raises(UsageError, match="network filesystem"):
        Home.open(str(tmp_path / "fresh"), store=str(tmp_path / "nfs" / "s.db"))
    assert not (tmp_path / "fresh").exists()
    # a store on local disk: recorded, and the writer accepts it
    local = Home.open(str(tmp_path / "nfs" / "home"), store=str(tmp_path / "local" / "s.db"))
    assert local.writer_store_path() == tmp_path / "local" / "s.db"
    assert (tmp_path / "local").is_dir() and (tmp_path / "nfs" / "home" / "store.location").exists()
    assert Home.open(str(tmp_path / "nfs" / "home")).store.path == tmp_path / "local" / "s.db"   # found again


def test_a_read_only_open_with_a_request_records_nothing(tmp_path):
    root = tmp_path / "home"
    root.mkdir()
    home = Home.open(str(root), create=False, store=str(tmp_path / "s.db"))
    assert home.store.path == tmp_path / "s.db"
    assert not (root / "store.location").exists()


def test_two_homes_never_share_one_store(tmp_path):
    store = str(tmp_path / "local" / "store.db")
    first = Home.open(str(tmp_path / "a"), store=store)
    lock = EngineLock(first)
    lock.acquire()                      # the first home's engine holds its store
    try:
        assert (tmp_path / "local" / "store.db.owner").read_text().strip() == str(tmp_path / "a")
        with pytest.raises(UsageError, match="belongs to home"):
            Home.open(str(tmp_path / "b"), store=store)
        assert not (tmp_path / "b").exists()
        # while held, a second writer's claim (another open of the owner file) is refused by the flock
        with pytest.raises(UsageError, match="in use by another engine"):
            store_location.claim(tmp_path / "a", first.store)
    finally:
        lock.release()
    lock.acquire()                      # released and taken again by the same home
    lock.release()


def test_a_whole_copy_folds_in_what_is_still_in_the_wal_and_never_overwrites(tmp_path):
    import sqlite3

    from autorl_tui.store.copy import copy_whole
    from autorl_tui.store.db import Store, StoreError
    from tests.support.run_writer import RunShape, write_run

    live = Store(tmp_path / "store.db")
    write_run(live, RunShape(run_id="r0001-x"))
    live.flush()                                   # committed, not checkpointed: the rows sit in the WAL
    assert (tmp_path / "store.db-wal").stat().st_size > 0
    copy_whole(tmp_path / "store.db", tmp_path / "moved" / "store.db")
    live.close()
    assert sorted(p.name for p in (tmp_path / "moved").iterdir()) == ["store.db"]    # no temporary left
    conn = sqlite3.connect(tmp_path / "moved" / "store.db")
    assert conn.execute("SELECT id FROM runs").fetchall() == [("r0001-x",)]
    conn.close()
    (tmp_path / "bad.db").write_bytes(b"not a database" * 100)
    with pytest.raises(StoreError):
        copy_whole(tmp_path / "bad.db", tmp_path / "out" / "store.db")
    assert not (tmp_path / "out" / "store.db").exists()


MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:45 / /mnt/remote rw,nosuid,nodev shared:20 - fuse.sshfs user@host:/data rw,user_id=0
41 40 0:46 / /mnt/remote/inner\\040dir rw shared:21 - fuse.fuse-overlayfs fuse-overlayfs rw
"""


def test_the_fuse_subtype_is_the_deepest_mount_holding_the_path():
    assert filesystems.fuse_subtype("/mnt/remote/home/store.db", MOUNTINFO) == "sshfs"
    assert filesystems.fuse_subtype("/mnt/remote/inner dir/x", MOUNTINFO) == "fuse-overlayfs"
    assert filesystems.fuse_subtype("/mnt/remoteX/x", MOUNTINFO) is None        # not under /mnt/remote
    assert "sshfs" not in filesystems.LOCAL_FUSE and "fuse-overlayfs" in filesystems.LOCAL_FUSE


def test_the_store_flag_is_seen_by_the_command_and_leaves_the_environment_as_it_was(tmp_path, monkeypatch, capsys):
    import os

    from autorl_tui import cli

    monkeypatch.delenv("AUTORL_STORE", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    assert cli.main(["--home", str(home), "store", "--json", "--store", str(tmp_path / "s.db")]) == 0
    assert json.loads(capsys.readouterr().out)["path"] == str(tmp_path / "s.db")
    assert "AUTORL_STORE" not in os.environ
    store_location.record(home, store_location.resolve(home, str(tmp_path / "s.db")))
    assert cli.main(["--home", str(home), "--store", str(tmp_path / "t.db"), "runs", "list"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("autorl-tui: error: home ") and "t.db" in err[0]
    monkeypatch.setenv("AUTORL_STORE", str(tmp_path / "s.db"))
    assert cli.main(["--home", str(home), "--store", str(tmp_path / "s.db"), "store", "--json"]) == 0
    assert os.environ["AUTORL_STORE"] == str(tmp_path / "s.db")


def test_an_existing_file_that_is_not_a_store_is_never_taken_for_one(tmp_path):
    from autorl_tui.store.db import Store

    root = tmp_path / "home"
    root.mkdir()
    (tmp_path / "notes.txt").write_text("my notes\n")
    with pytest.raises(UsageError, match="is not an autorl-tui store"):
        store_location.resolve(root, str(tmp_path / "notes.txt"))
    assert (tmp_path / "notes.txt").read_text() == "my notes\n"
    Store(tmp_path / "kept.db").close()                     # a store (moved by hand) and an empty file are fine
    (tmp_path / "empty.db").touch()
    for name in ("kept.db", "empty.db"):
        assert store_location.resolve(root, str(tmp_path / name)).path == tmp_path / name


def test_a_reader_naming_a_store_nothing_has_created_is_told_the_flag_named_it(tmp_path):
    root = tmp_path / "home"
    location = store_location.resolve(root, str(tmp_path / "s.db"))
    with pytest.raises(UsageError, match=r"named by --store or AUTORL_STORE") as err:
        store_location.check_reader(root, location)
    assert "recorded in" not in str(err.value) and not root.exists()       # no record claimed, nothing written

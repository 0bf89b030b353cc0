"""The store on the engine's local disk, through the real CLI in subprocesses: a real engine
started with `--store` writes its store there and the home records it; later commands find it
without the flag; a mismatch, another machine's record and a home on a (simulated) network
filesystem are one-line usage errors (exit 2) that create nothing. docs/cluster.md."""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from autorl_tui.store.db import Store
from tests.support.harness import REPO, cli
from tests.support.run_writer import RunShape, write_run

pytestmark = pytest.mark.subprocess
RUN = "r0001-arith-small-baseline-copy-s0"


def clean_error(proc, *phrases):
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autorl-tui: error: "), proc.stderr
    for phrase in phrases:
        assert phrase in proc.stderr, proc.stderr


@pytest.fixture
def engine_home(tmp_path):
    """A home whose engine was started (for real) with its store outside the home, then stopped."""
    home, store = tmp_path / "home", tmp_path / "local" / "store.db"
    try:
        # named relative to where the operator is: the engine, started in the home, finds the same file
        started = subprocess.run([sys.executable, "-m", "autorl_tui", "--home", str(home), "--store", "local/", "engine",
                                  "start", "--timeout", "120"], capture_output=True, text=True, timeout=300,
                                 cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert started.returncode == 0, started.stdout + started.stderr
        status = cli("engine", "status", home=home)
        assert status.returncode == 0 and f"store {store}" in status.stdout, status.stdout + status.stderr
    finally:
        stopped = cli("engine", "stop", home=home)
    assert stopped.returncode == 0, stopped.stderr
    return home, store


def test_the_engine_writes_the_store_outside_the_home_and_later_commands_find_it(engine_home, tmp_path):
    home, store = engine_home
    assert store.exists() and not (home / "store.db").exists()
    record = json.loads((home / "store.location").read_text())
    assert record["store"] == str(store) and record["host"]
    with sqlite3.connect(store) as conn:                       # the engine made it a store (its schema)
        assert conn.execute("PRAGMA user_version").fetchone()[0] > 0
    s = Store(store)
    write_run(s, RunShape(run_id=RUN, task="arith-small"))
    s.close()
    listed = cli("runs", "list", "--json", home=home)              # no --store: the record names it
    assert listed.returncode == 0, listed.stderr
    assert [r["id"] for r in json.loads(listed.stdout)] == [RUN]
    again = cli("--store", str(store.parent), "runs", "list", home=home)   # the same store, named by its folder
    assert again.returncode == 0 and RUN in again.stdout, again.stderr
    out = tmp_path / "report.json"
    report = cli("report", RUN, "--json", str(out), home=home)         # reports read the same store
    assert report.returncode == 0, report.stderr
    assert json.loads(out.read_text())["store"] == str(store)
    doctor = cli("doctor", "--json", home=home)
    said = json.loads(doctor.stdout)["store"]
    assert (said["path"], said["recorded"], said["here"], said["network"]) == (str(store), True, True, False)


def test_a_store_flag_naming_another_store_is_exit_2_and_creates_nothing(engine_home, tmp_path):
    home, store = engine_home
    other = tmp_path / "other" / "store.db"
    before = (home / "store.location").read_text()
    for argv in (["runs", "list"], ["engine", "start"], ["report", RUN]):
        clean_error(cli("--store", str(other), *argv, home=home), str(store), str(other), "leave --store out")
        assert not other.parent.exists()
        assert (home / "store.location").read_text() == before
    assert not (home / "engine.sock").exists()


def test_another_machines_store_is_named_never_replaced_by_an_empty_one(engine_home, tmp_path):
    home, store = engine_home
    record = json.loads((home / "store.location").read_text())
    # The record as the engine's machine wrote it, read on a node that mounts the same home:
    # here, the same record naming another machine.
    (home / "store.location").write_text(json.dumps(dict(record, host="node-b", machine_id="f" * 32)))
    store.unlink()
    for argv in (["runs", "list"], ["runs", "prune", "--dry-run"], ["report", RUN], ["engine", "start"],
                 ["engine", "status"]):
        clean_error(cli(*argv, home=home), "lives on the engine's machine node-b", str(store), "unix socket")
    assert not store.exists() and not (home / "store.db").exists()
    ok = cli("doctor", "--json", home=home)                 # what needs no store still works on the node
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["store"]["here"] is False


def test_an_engine_refuses_a_store_on_a_network_filesystem_naming_the_flag(tmp_path):
    nfs = {"AUTORL_TEST_NETWORK_FS": str(tmp_path / "nfs")}
    home = tmp_path / "nfs" / "home"
    clean_error(cli("engine", "start", home=home, env=nfs), "network filesystem", "nfs", "--store")
    assert not (home / "store.db").exists() and not (home / "engine.sock").exists()
    clean_error(cli("--store", str(tmp_path / "nfs" / "s.db"), "engine", "status", home=tmp_path / "h2", env=nfs),
                "network filesystem")
    assert not (tmp_path / "h2").exists()
    local = tmp_path / "local" / "store.db"
    try:
        started = cli("--store", str(local), "engine", "start", "--timeout", "120", home=home, env=nfs)
        assert started.returncode == 0, started.stderr
    finally:
        assert cli("engine", "stop", home=home, env=nfs).returncode == 0
    assert local.exists() and not (home / "store.db").exists()
    # another home naming the same store: refused, nothing of it created
    clean_error(cli("--store", str(local), "engine", "start", home=tmp_path / "h3"), "belongs to home", str(home))
    assert not (tmp_path / "h3").exists()


def test_a_home_keeping_its_store_inside_is_not_given_a_second_one(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    Store(home / "store.db").close()
    clean_error(cli("--store", str(tmp_path / "s.db"), "runs", "list", home=home), "keeps its store inside it",
                f"store move {tmp_path / 's.db'}")
    assert not (tmp_path / "s.db").exists() and not (home / "store.location").exists()
    assert Path(home / "store.db").exists()


def test_a_store_in_a_home_on_a_network_filesystem_is_moved_to_local_disk(tmp_path):
    nfs = {"AUTORL_TEST_NETWORK_FS": str(tmp_path / "nfs")}
    home = tmp_path / "nfs" / "home"
    home.mkdir(parents=True)
    s = Store(home / "store.db")                      # a home made before the store could live elsewhere
    write_run(s, RunShape(run_id=RUN, task="arith-small"))
    s.close()
    clean_error(cli("engine", "start", home=home, env=nfs), "network filesystem", "store move")
    shown = cli("store", "--json", home=home, env=nfs)
    assert shown.returncode == 0 and json.loads(shown.stdout)["network"] is True, shown.stderr
    clean_error(cli("store", "move", str(tmp_path / "nfs" / "elsewhere.db"), home=home, env=nfs), "network filesystem")
    local = tmp_path / "local"
    moved = cli("store", "move", f"{local}/", home=home, env=nfs)
    assert moved.returncode == 0, moved.stderr
    assert not (home / "store.db").exists() and (local / "store.db").exists()
    assert json.loads((home / "store.location").read_text())["store"] == str(local / "store.db")
    listed = cli("runs", "list", "--json", home=home, env=nfs)
    assert listed.returncode == 0 and [r["id"] for r in json.loads(listed.stdout)] == [RUN], listed.stderr
    try:
        started = cli("engine", "start", "--timeout", "120", home=home, env=nfs)
        assert started.returncode == 0, started.stderr
        busy = cli("store", "move", str(tmp_path / "third.db"), home=home, env=nfs)     # its engine runs: exit 3
        assert busy.returncode == 3 and "already owns home" in busy.stderr, busy.stderr
        assert not (tmp_path / "third.db").exists()
    finally:
        assert cli("engine", "stop", home=home, env=nfs).returncode == 0


def in_fuse_mount(src, mnt, *argv: str):
    """`autorl-tui ARGV` with MNT a real FUSE mount (bindfs of SRC) in a private mount namespace,
    unmounted (its bindfs process ending) before this returns."""
    script = 'bindfs "$0" "$1" || exit 99; shift; "$@"; rc=$?; fusermount -u "$M"; exit $rc'
    env = dict(os.environ, PYTHONPATH=str(REPO), M=str(mnt))
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(src), str(mnt),
                           sys.executable, "-m", "autorl_tui", *argv], capture_output=True, text=True, timeout=300,
                          env=env, cwd=REPO)


@pytest.mark.skipif(not (shutil.which("bindfs") and os.path.exists("/dev/fuse") and os.geteuid() == 0),
                    reason="needs bindfs (scripts/system-deps.sh), /dev/fuse and root for a private mount namespace")
def test_a_home_on_a_real_fuse_mount_is_refused_by_the_kernels_filesystem_type(tmp_path):
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    src.mkdir()
    mnt.mkdir()
    shown = in_fuse_mount(src, mnt, "--home", str(mnt / "home"), "store", "--json")
    assert shown.returncode == 0, shown.stderr
    said = json.loads(shown.stdout)
    assert (said["f_type"], said["network"], said["simulated"]) == ("0x65735546", True, False), said
    assert said["filesystem"].startswith("fuse")
    refused = in_fuse_mount(src, mnt, "--home", str(mnt / "home"), "engine", "start")
    clean_error(refused, "network filesystem", "f_type 0x65735546", "--store")
    assert not (src / "home" / "store.db").exists() and not (src / "home" / "engine.sock").exists()
    named = in_fuse_mount(src, mnt, "--home", str(tmp_path / "h2"), "--store", str(mnt / "s.db"), "engine", "status")
    clean_error(named, "network filesystem")
    assert not (tmp_path / "h2").exists() and not (src / "s.db").exists()

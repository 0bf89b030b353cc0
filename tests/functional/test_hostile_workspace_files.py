"""Hostile workspace files, with both executors (issue 24, breaches 1 and 7).

A checkpoint padded with a 3 GB sparse file is refused with the sizes and the cap, before anything
is copied (the home grows by nothing). The harness's writes into the agent-writable workspace never
follow a link the agent planted: the agent points run_meta.json, instructions.md, prompt.md and
their old fixed `.tmp` names at a harness-owned file outside the workspace, submits, and that file
keeps its content and mode while the run finishes with its submission scored."""

import json
import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest

from tests.support.harness import (TASKS, TEST_AGENTS, cli, home_with_tiny, install_model, make_reachable_home,
                                   write_plan)

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("executor", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_sparse_checkpoint_refused_and_planted_links_never_written_through(executor, tiny_model_dir, tmp_path, docker_available):
    if executor == "docker" and not docker_available:
        pytest.skip("DOCKER ENGINE NOT REACHABLE: the docker link test did not run")
    home = make_reachable_home()
    home.mkdir(parents=True)
    install_model(tiny_model_dir, home)
    try:
        victim = tmp_path / "stands-in-for-the-store.db"
        victim.write_bytes(b"precious harness data\n")
        os.chmod(victim, 0o600)
        before = victim.stat()
        plan = write_plan(tmp_path / "plan.yaml", agents=["test-hostile-files"], budget="180s", executor=executor)
        proc = cli("--agents-dir", str(TEST_AGENTS), "--tasks-dir", str(TASKS), "--plain", "--batch", str(plan),
                   home=home, timeout=500, env={"VICTIM": str(victim)})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert victim.read_bytes() == b"precious harness data\n"
        after = victim.stat()
        assert stat.S_IMODE(after.st_mode) == 0o600 and after.st_mtime_ns == before.st_mtime_ns
        db = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
        db.row_factory = sqlite3.Row
        run = dict(db.execute("SELECT * FROM runs").fetchone())
        assert run["state"] == "done", run
        subs = [dict(r) for r in db.execute("SELECT status, score, error, snapshot_path FROM submissions ORDER BY seq")]
        assert [s["status"] for s in subs] == ["rejected", "scored"] and subs[1]["score"] is not None
        ws = Path(run["workspace"])
        report = json.loads((ws / "logs" / "hostile.json").read_text())
        status, body = report["sparse"]
        assert status == 400 and body["code"] == "too_large", body
        assert "3.0 GiB" in body["error"] and "sparse" in body["error"] and "snapshot cap of 1.0 GiB" in body["error"]
        assert subs[0]["error"] == body["error"] and subs[0]["snapshot_path"] is None
        snapshots = home / "snapshots" / run["id"]
        on_disk = sum(p.lstat().st_blocks * 512 for p in snapshots.rglob("*"))
        model_bytes = sum(p.stat().st_size for p in tiny_model_dir.rglob("*") if p.is_file())
        assert on_disk < 2 * model_bytes + 1024**2          # only the valid submission's copy
        assert not any(p.name == "padding.bin" for p in home.rglob("padding.bin") if "snapshots" in p.parts)
        assert "run_meta.json.tmp" in report["planted"] and report["valid"][1]["score"] == subs[1]["score"]
        # the harness rewrote run_meta.json after the graded submission: a fresh regular file
        meta_st = os.lstat(ws / "run_meta.json")
        assert stat.S_ISREG(meta_st.st_mode) and stat.S_IMODE(meta_st.st_mode) == 0o444
        assert json.loads((ws / "run_meta.json").read_text())["last_submit_time"] is not None
        assert stat.S_ISREG(os.lstat(ws / "instructions.md").st_mode)
        assert os.path.islink(ws / "run_meta.json.tmp")     # the planted link itself was left alone
        db.close()
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)


@pytest.fixture
def tiny_home(tiny_model_dir):
    """(a reachable home with the tiny model installed, the model's folder); removed afterwards."""
    for home in home_with_tiny(tiny_model_dir):
        yield home, tiny_model_dir


@pytest.mark.parametrize("executor", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_output_replaced_by_a_link_to_root_copies_nothing_and_leaks_nothing(executor, tiny_home, tmp_path,
                                                                           docker_available):
    """Issue 31, breach 2, with both executors: the agent makes output/ a link to / and submits a
    folder of links to a root-only file, a held-out split and the real store.db through it, probes
    host paths through the link, and submits another run's snapshot through a link. All are refused
    with messages that name nothing outside the workspace; the snapshots hold none of those bytes;
    a valid submission afterwards is scored."""
    if executor == "docker" and not docker_available:
        pytest.skip("DOCKER ENGINE NOT REACHABLE: the docker output-link test did not run")
    from autorl_tui.grading_host.submissions import snapshot_folder

    home, tiny_model_dir = tiny_home
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    victim, split = private / "root-only", private / "test.jsonl"
    victim.write_bytes(b"ROOT-ONLY 9f3c\n")
    split.write_bytes(b'{"id": "held-out-7", "prompt": "never seen"}\n')
    for p in (victim, split):
        os.chmod(p, 0o600)
    other = snapshot_folder(tiny_model_dir, home / "snapshots" / "r0000-other" / "001", 1 << 30)
    plan = write_plan(tmp_path / "plan.yaml", agents=["test-output-link"], budget="180s", executor=executor)
    proc = cli("--agents-dir", str(TEST_AGENTS), "--tasks-dir", str(TASKS), "--plain", "--batch", str(plan),
               home=home, timeout=500, env={"VICTIM": str(victim), "SPLIT": str(split),
                                            "STORE": str(home / "store.db"), "OTHER_SNAPSHOT": str(other.path)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    db = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    run = dict(db.execute("SELECT * FROM runs").fetchone())
    subs = [dict(r) for r in db.execute("SELECT status, error, snapshot_path FROM submissions ORDER BY seq")]
    db.close()
    assert run["state"] == "done", run
    assert [s["status"] for s in subs] == ["rejected"] * 4 + ["scored"], subs
    report = json.loads((Path(run["workspace"]) / "logs" / "output_link.json").read_text())
    for key in ("root", "oracle_present", "oracle_absent", "theirs"):
        status, body = report[key]
        assert status == 400 and body["code"] == "symlink_out", (key, body)
        for host_path in (private, home, other.path):
            assert str(host_path) not in body["error"], (key, body)
    assert report["oracle_present"][1]["error"] == report["oracle_absent"][1]["error"]
    assert report["valid"][0] == 200
    for path in (home / "snapshots" / run["id"]).rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert b"ROOT-ONLY 9f3c" not in data and b"held-out-7" not in data
            assert not data.startswith(b"SQLite format 3"), path

"""The harness's writes into the agent-writable workspace never follow a link the agent planted
(issue 24, breach 1): with both executors, an agent points run_meta.json, instructions.md,
prompt.md and their old fixed `.tmp` names at a harness-owned file outside the workspace, submits,
and that file keeps its content and mode while the run finishes with its submission scored."""

import json
import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest

from tests.support.harness import TASKS, TEST_AGENTS, cli, install_model, make_reachable_home, write_plan

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("executor", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_planted_links_are_replaced_never_written_through(executor, tiny_model_dir, tmp_path, docker_available):
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
        plan = write_plan(tmp_path / "plan.yaml", agents=["test-link-planter"], budget="180s", executor=executor)
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
        subs = [dict(r) for r in db.execute("SELECT status, score FROM submissions")]
        assert [s["status"] for s in subs] == ["scored"] and subs[0]["score"] is not None
        ws = Path(run["workspace"])
        report = json.loads((ws / "logs" / "planted.json").read_text())
        assert "run_meta.json.tmp" in report["planted"] and report["answer"]["score"] == subs[0]["score"]
        # the harness rewrote run_meta.json after the graded submission: a fresh regular file
        meta_st = os.lstat(ws / "run_meta.json")
        assert stat.S_ISREG(meta_st.st_mode) and stat.S_IMODE(meta_st.st_mode) == 0o444
        assert json.loads((ws / "run_meta.json").read_text())["last_submit_time"] is not None
        assert stat.S_ISREG(os.lstat(ws / "instructions.md").st_mode)
        assert os.path.islink(ws / "run_meta.json.tmp")     # the planted link itself was left alone
        db.close()
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)

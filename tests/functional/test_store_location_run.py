"""A real plan with the store outside the home (`--store`, through the real CLI, a sandboxed agent,
the real grader on the tiny model): the run is done, its record is in the named store and none in
the home, later commands find it without the flag, and the agent, whose program folder holds the
store, cannot read it (the store outside the home is among the engine's private paths)."""

import json
import shutil
import sqlite3

import pytest

from tests.support.harness import TASKS, TEST_AGENTS, cli, home_with_tiny, write_plan

pytestmark = pytest.mark.slow


@pytest.fixture
def home(tiny_model_dir):
    yield from home_with_tiny(tiny_model_dir)


def test_a_plan_runs_with_its_store_on_local_disk_that_the_agent_cannot_read(home, tmp_path):
    agents = home.parent / "agents"            # reachable by the agent's user, like the home
    agents.mkdir()
    for name in ("store_probe.yaml", "store_probe.py", "grading_api.py"):
        shutil.copy(TEST_AGENTS / name, agents / name)
    store = agents / "local-store" / "store.db"          # inside the agent's program folder, which its sandbox binds
    store.parent.mkdir(mode=0o755)
    store.touch(mode=0o644)     # a store others may read (made by hand): only the sandbox's hiding guards it
    plan = write_plan(tmp_path / "plan.yaml", agents=["test-store-probe"], budget="120s")
    probe = f"{store}:{store}-wal"
    proc = cli("--agents-dir", str(agents), "--tasks-dir", str(TASKS), "--store", str(store), "--plain",
               "--batch", str(plan), home=home, timeout=600, env={"STORE_PROBE": probe})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert store.exists() and not (home / "store.db").exists()
    assert json.loads((home / "store.location").read_text())["store"] == str(store)
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    (run_id, state, workspace), = db.execute("SELECT id, state, workspace FROM runs").fetchall()
    assert state == "done"
    with open(f"{workspace}/logs/probe.json") as fh:
        seen = json.load(fh)
    assert set(seen) == {str(store), f"{store}-wal"}
    assert all(v.startswith("error: ") for v in seen.values()), seen       # /dev/null on a nodev mount: EACCES
    listed = cli("runs", "list", "--json", home=home)
    assert listed.returncode == 0 and [r["id"] for r in json.loads(listed.stdout)] == [run_id], listed.stderr

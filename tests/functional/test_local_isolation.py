"""Local executor isolation, attacked for real: two concurrent runs under one engine, each agent
in its bubblewrap sandbox, each trying to reach the other run, the held-out split, the store,
another home, the mounts, and its read-only model and data (tests/agents/sandbox_attack.py).
And the refusal of `local` on a host that cannot isolate, with `isolation: none` as the
recorded, visibly marked way out."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from autorl_tui.isolation.sandbox_bwrap import UID_BASE, UID_COUNT
from tests.support.harness import (REPO, TASKS, TEST_AGENTS, cli, home_with_tiny, load_json, make_reachable_home,
                                   sandbox_leftovers, write_plan)
from tests.support.waiting import wait_for, wait_for_async

pytestmark = pytest.mark.slow


@pytest.fixture
def home(tiny_model_dir):
    yield from home_with_tiny(tiny_model_dir)


@pytest.fixture
def other_home():
    from autorl_tui.store import Store

    h = make_reachable_home("autorl-other-")
    h.mkdir(parents=True)
    Store(h / "store.db").close()
    (h / "cache").mkdir()
    (h / "cache" / "test.jsonl").write_text('{"secret": "held-out"}\n')
    yield h
    shutil.rmtree(h.parent, ignore_errors=True)


def host_pids(log_dir: Path) -> list[int]:
    shim = json.loads((log_dir / "shim.json").read_text())
    return [p.pid for p in psutil.Process(shim["shim_pid"]).children(recursive=True)]


def test_two_concurrent_local_agents_cannot_reach_each_other_or_private_data(home, other_home, tmp_path):
    from autorl_tui.catalog.tasks import find_task, materialize

    # Materialized once up front: concurrent first runs of a task race on the cache (issue 24, item 9).
    card = find_task("arith-small", [TASKS])
    for split in ("train", "dev", "test"):
        materialize(card, split, home / "cache" / "tasks")
    plan = write_plan(tmp_path / "plan.yaml", agents=["test-sandbox-attack"], seeds=[0, 1], budget="150s")
    attack = [home / "store.db", home / "cache", home / "snapshots", home / "runs", home / "workspaces",
              other_home / "store.db", other_home / "cache" / "test.jsonl", TASKS / "arith-small",
              REPO / "pyproject.toml", REPO / "autorl_tui" / "grading", REPO / "autorl_tui" / "catalog" / "generators"]
    env = dict(os.environ, PYTHONPATH=str(REPO), ATTACK_PATHS=":".join(map(str, attack)))
    proc = subprocess.Popen([sys.executable, "-m", "autorl_tui", "--home", str(home), "--agents-dir", str(TEST_AGENTS),
                             "--tasks-dir", str(TASKS), "--plain", "--concurrency", "2", "--batch", str(plan)],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        ready = lambda: sorted(p.parents[1] for p in (home / "workspaces").glob("*/logs/ready"))  # noqa: E731
        workspaces = wait_for(lambda: len(ready()) == 2 and ready(), 400, "both agents to start at once", proc=proc)
        assert len(workspaces) == 2
        held_out = sorted(str(p) for p in (home / "cache").rglob("test*") if p.is_file())
        assert held_out, "the held-out split is materialized on the host"
        pids = {ws: wait_for(lambda: host_pids(home / "runs" / ws.name / "attempt-1"), 30, "agent pids") for ws in workspaces}
        for me, other in (workspaces, workspaces[::-1]):
            targets = {"pids": pids[other], "workspace": str(other), "paths": held_out}
            (me / "logs" / "targets.json.tmp").write_text(json.dumps(targets))
            os.replace(me / "logs" / "targets.json.tmp", me / "logs" / "targets.json")
        out, _ = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
    db = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    tokens = {Path(ws).name: url for ws, url in db.execute(
        "SELECT r.workspace, a.grading_url FROM runs r JOIN attempts a ON a.run_id = r.id")}
    results = {ws: load_json(ws / "logs" / "attack.json") for ws in workspaces}
    uids = set()
    for (me, other) in (workspaces, workspaces[::-1]):
        r = results[me]
        text = json.dumps(r)
        assert tokens[other.name] not in text and tokens[other.name].rsplit("/", 1)[-1] not in text
        # never root, never the harness's uid, one uid per run, no capabilities, no_new_privs
        assert UID_BASE <= r["uid"] < UID_BASE + UID_COUNT and r["uid"] == r["euid"] != os.getuid(), r["uid"]
        assert r["id_u"] == f"exit 0: {r['uid']}" and r["groups"] in ([], [r["gid"]])
        assert int(r["cap_eff"], 16) == 0 and r["no_new_privs"] == "1"
        uids.add(r["uid"])
        # the other run's processes: not there (own PID namespace), so no token, root or cwd
        assert r["other_pids"] and all(v.startswith("error") for probe in r["other_pids"].values() for v in probe.values()), r["other_pids"]
        assert set(r["visible_pids"].values()) == {"own or unreadable"}
        assert r["other_workspace_write"].startswith("error") and r["other_workspace_read"].startswith("error")
        assert not (other / "code" / "pwned").exists() and not (other / "pwned-via-cwd").exists()
        # the held-out split, the store, other homes, task sources: absent
        assert set(r["paths"]) >= {*map(str, attack), *held_out}
        # (the workspaces folder exists only as the way to its own workspace: it lists that one alone)
        assert r["paths"].pop(str(home / "workspaces")) == f"ok: {[me.name]}"
        assert not {k: v for k, v in r["paths"].items() if not v.startswith("error")}
        # masked paths cannot be unmounted, nothing can be mounted
        for key in ("umount_tmp", "umount_models", "mount_tmpfs"):
            assert not r[key].startswith("exit 0"), (key, r[key])
        # base model and train data are read-only; its own places are writable
        for key in ("models_write", "models_new_file", "data_write", "data_new_file"):
            assert r[key].startswith("error"), (key, r[key])
        assert r["tmp_write"].startswith("ok") and r["output_write"].startswith("ok")
    assert len(uids) == 2
    model = next((home / "models").iterdir())
    assert b"pwned" not in (model / "config.json").read_bytes()
    # every sandboxed process is gone with its run (no process of either run's uid is left)
    for ws in workspaces:
        assert not sandbox_leftovers(home / "runs" / ws.name / "attempt-1", zombies=True)


def test_local_is_refused_where_the_host_cannot_isolate_unless_the_plan_says_isolation_none(home, tmp_path):
    missing = tmp_path / "no-such-bwrap"
    plan = write_plan(tmp_path / "plan.yaml", budget="60s")
    proc = cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(plan), home=home, env={"AUTORL_BWRAP": str(missing)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    message = proc.stdout + proc.stderr
    assert "cannot isolate" in message and str(missing) in message and "isolation: none" in message
    assert "executor: docker" in message and "bubblewrap" in message and "Traceback" not in message
    if (home / "store.db").exists():
        assert sqlite3.connect(home / "store.db").execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0

    plan = write_plan(tmp_path / "plan-none.yaml", budget="60s", isolation="none")
    proc = cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(plan), home=home, env={"AUTORL_BWRAP": str(missing)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    listed = json.loads(cli("runs", "list", "--json", home=home, check=True).stdout)
    assert [r["isolation"] for r in listed] == ["none"]
    run_id = listed[0]["id"]
    cli("report", run_id, "--json", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html"), home=home, check=True)
    assert load_json(tmp_path / "r.json")["run"]["isolation"] == "none"
    assert "UNISOLATED" in (tmp_path / "r.html").read_text()
    cli("export", run_id, "--json", str(tmp_path / "e.json"), home=home, check=True)
    assert load_json(tmp_path / "e.json")["isolation"] == "none"
    cli("compare", run_id, "--json", str(tmp_path / "c.json"), home=home, check=True)
    assert load_json(tmp_path / "c.json")["unisolated_runs"] == [run_id]


@pytest.mark.docker
def test_a_docker_runs_token_is_invisible_to_a_concurrent_local_agent(home, tmp_path, docker_available):
    if not docker_available:
        pytest.skip("DOCKER ENGINE NOT REACHABLE: the docker/local token test did not run")
    import asyncio

    import docker

    from autorl_tui.catalog.plans import parse_plan
    from autorl_tui.catalog.tasks import find_task, materialize
    from autorl_tui.engine.engine import Engine
    from autorl_tui.home import Home

    card = find_task("arith-small", [TASKS])
    for split in ("train", "dev", "test"):
        materialize(card, split, home / "cache" / "tasks")
    base = "tasks: [arith-small]\nmodels: [tiny]\nseeds: [0]\nbudget: 150s\n"
    client = docker.from_env()

    def docker_pids(engine, run_id):
        row = engine.store.one("SELECT container_id FROM attempts WHERE run_id=? AND container_id IS NOT NULL", (run_id,))
        if not row:
            return None
        top = client.containers.get(row["container_id"]).attrs["State"]["Pid"]
        return [top] + [p.pid for p in psutil.Process(top).children(recursive=True)] if top else None

    async def run():
        engine = Engine(Home.open(str(home)), tasks_dirs=[TASKS], agents_dirs=[TEST_AGENTS], concurrency=2)
        await engine.start()
        try:
            [victim] = await engine.enqueue_plan(parse_plan(base + "name: victim\nagents: [test-budget-hog]\nexecutor: docker\n"))
            [attacker] = await engine.enqueue_plan(parse_plan(base + "name: attacker\nagents: [test-sandbox-attack]\n"))
            ws = home / "workspaces" / attacker

            def both_running():
                pids = docker_pids(engine, victim)
                return pids if pids and (ws / "logs" / "ready").exists() else None

            pids = await wait_for_async(both_running, 400, "both agents running at once", interval=0.2)
            (ws / "logs" / "targets.json").write_text(json.dumps({"pids": pids, "workspace": str(home / "workspaces" / victim)}))
            await asyncio.wait_for(engine.wait_runs([attacker]), 300)
            await engine.cancel(victim, "test over")
            await asyncio.wait_for(engine.wait_runs([victim]), 300)
            token = engine.store.one("SELECT grading_url FROM attempts WHERE run_id=?", (victim,))["grading_url"]
            return load_json(ws / "logs" / "attack.json"), token
        finally:
            await engine.stop(cancel_runs=True)

    r, token = asyncio.run(run())
    assert r["other_pids"] and all(v.startswith("error") for probe in r["other_pids"].values() for v in probe.values())
    assert set(r["visible_pids"].values()) == {"own or unreadable"}
    assert token.rsplit("/", 1)[-1] not in json.dumps(r)
    assert r["other_workspace_read"].startswith("error") and r["other_workspace_write"].startswith("error")


async def test_the_grader_worker_runs_sandboxed_as_a_leased_uid(tmp_path, tiny_model_dir, monkeypatch):
    from autorl_tui.catalog.tasks import find_task, materialize
    from autorl_tui.grading_host.grader_service import DISABLE_ENV

    monkeypatch.setenv(DISABLE_ENV, "0")   # the cold worker (the warm one: tests/functional/test_warm_grader.py)
    from autorl_tui.grading_host.grading_client import run_grader

    card = find_task("arith-small", [TASKS])
    split_path = materialize(card, "dev", tmp_path / "cache")
    request = {"task": card.to_dict(), "split": "dev", "split_path": str(split_path), "model_path": str(tiny_model_dir),
               "protocol": card.protocol.to_dict(), "scorer": card.scorer, "scorer_options": {},
               "backend": "transformers", "device": "cpu", "threads": 1, "seed": 0, "limit": 8, "pass_env": []}
    work = tmp_path / "grading"
    outcome = await run_grader(request, work, timeout_s=300)
    assert outcome.ok, outcome.error
    owner = (work / "result.json").stat().st_uid   # written by the worker itself
    assert UID_BASE <= owner < UID_BASE + UID_COUNT
    assert (work / "worker.log").stat().st_uid == os.getuid()   # the harness's, opened before the start
    assert not (split_path.parent / "scratch").exists()   # scratch lives in the work dir, not the cache

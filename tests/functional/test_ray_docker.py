"""`executor: ray` with containers (`cluster: {containers: true}`, or an `image:`): Ray places the
run's actor, which runs the agent in a container of its node's Docker Engine through the docker
executor's code (executors/docker_shim.py). Against a real local Ray cluster (head + 2 workers with
fake GPUs) and the real Docker Engine, with the offline runtime image (no registry). The runs ask
for no GPU: Docker cannot hand out the workers' fake GPUs (pinning Ray's ids as the container's
devices is checked in tests/unit/test_ray_containers.py)."""

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autorl_tui.catalog.plans import parse_plan
from autorl_tui.engine.engine import Engine
from autorl_tui.executors.docker import LABEL_HOME, LABEL_RUN
from autorl_tui.engine.scheduling import RetryPolicy
from autorl_tui.home import Home
from tests.support.docker_engine import docker_client  # noqa: F401 (fixture)
from tests.support.harness import REPO, TASKS, TEST_AGENTS, cli, write_plan
from tests.support.ray_cluster import one_run_plan, ray_cluster, ray_home, retrying_engine  # noqa: F401
from tests.support.slow_task import slow_task

pytestmark = [pytest.mark.slow, pytest.mark.docker]


def _plan(address, agent, seeds=(0,), budget="240s"):
    return parse_plan(f"name: ray-docker\ntasks: [arith-small]\nagents: [{agent}]\nmodels: [tiny]\n"
                      f"seeds: {list(seeds)}\nbudget: {budget}\nexecutor: ray\ngpus_per_run: 0\n"
                      f"cluster: {{address: '{address}', containers: true}}\n")


def _containers(client, home, run_id=None):
    labels = [f"{LABEL_HOME}={Path(home).resolve()}"] + ([f"{LABEL_RUN}={run_id}"] if run_id else [])
    return client.containers.list(all=True, ignore_removed=True, filters={"label": labels})


def _stdout(store, run_id, prefix):
    return [e["message"] for e in store.query("SELECT message FROM events WHERE run_id=? AND kind='stdout' "
                                              "ORDER BY id", (run_id,)) if e["message"].startswith(prefix)]


async def _until(pred, timeout, what):
    t0 = time.monotonic()
    while not await asyncio.to_thread(pred):
        assert time.monotonic() - t0 < timeout, f"timed out waiting for {what}"
        await asyncio.sleep(0.3)


def test_a_containerized_run_placed_by_ray_finishes_graded_with_its_logs(ray_cluster, ray_home, docker_client):
    cluster, workers, _ = ray_cluster
    nodes = {cluster.head_node.node_id} | {w.node_id for w in workers}

    async def go():
        engine = Engine(Home.open(str(ray_home)), tasks_dirs=[TASKS], agents_dirs=[TEST_AGENTS])
        await engine.start()
        try:
            [run_id] = await engine.enqueue_plan(_plan(cluster.address, "test-gpu-probe"))
            seen: list = []
            # While it runs, its agent is in a container of this home, labelled with the run.
            await _until(lambda: seen.extend(c.id for c in _containers(docker_client, ray_home, run_id)
                                             if c.status == "running") or seen, 300, "the run's container")
            [row] = await asyncio.wait_for(engine.wait_runs([run_id]), 600)
            _check_done(engine.store, row, seen, nodes, ray_home, docker_client)
        finally:
            await engine.stop()

    asyncio.run(go())


def _check_done(store, row, seen, nodes, ray_home, docker_client):
    assert row["state"] == "done", (row["state"], row["end_reason"])
    assert row["baseline_score"] is not None and row["test_score"] is not None
    subs = store.query("SELECT status, score FROM submissions WHERE run_id=?", (row["id"],))
    assert [s["status"] for s in subs] == ["scored"] and subs[0]["score"] is not None
    [attempt] = store.query("SELECT * FROM attempts WHERE run_id=?", (row["id"],))
    log_dir = Path(attempt["log_dir"])
    where = json.loads((log_dir / "ray.json").read_text())
    assert where["node_id"] in nodes
    # The container Ray's actor started is the one recorded on the attempt (so a restarting engine
    # does not reap it); it exited cleanly and was removed.
    assert attempt["state"] == "exited" and attempt["container_id"] == seen[0]
    assert json.loads((log_dir / "exit.json").read_text())["container_status"] == 0
    assert not _containers(docker_client, ray_home, row["id"])
    # Complete logs and metrics, copied from the container into the shared home and tailed.
    assert _stdout(store, row["id"], "devices ") == ["devices "]         # no GPU asked, none visible
    assert _stdout(store, row["id"], "tick ") == [f"tick {i}" for i in range(12)]
    assert len(_stdout(store, row["id"], "submitted: ")) == 1
    steps = [m["step"] for m in store.query("SELECT step FROM metrics WHERE run_id=? AND name='tick' ORDER BY id",
                                            (row["id"],))]
    assert steps == list(range(12))
    # The agent reached the grading API through the node's forwarder: its dev submission was graded
    # as Ray work on the agent's node.
    ends = [json.loads(e["data"]) if isinstance(e["data"], str) else e["data"]
            for e in store.query("SELECT data FROM events WHERE run_id=? AND kind='grading'", (row["id"],))]
    dev = [e for e in ends if e.get("phase") == "end" and e.get("split") == "dev" and "where" in e
           and not e.get("baseline")]
    assert [e["where"]["node_id"] for e in dev] == [where["node_id"]]
    # The base model's gradings ran on the cluster too.
    bases = {e["split"]: e["where"]["node_id"] for e in ends if e.get("phase") == "end" and e.get("baseline")}
    assert set(bases) == {"dev", "test"} and set(bases.values()) <= nodes


def test_a_containerized_ray_run_is_re_adopted_then_cancelled_and_its_container_goes(ray_cluster, ray_home,
                                                                                       docker_client):
    """An engine that stops leaves the actor and its container running; the next engine re-adopts
    them (the container is not reaped as an orphan, the logs continue without a gap or duplicate),
    and cancelling the run stops the container: none is left, nor the actor."""
    cluster, _, _ = ray_cluster

    async def first():
        engine = Engine(Home.open(str(ray_home)), tasks_dirs=[TASKS], agents_dirs=[TEST_AGENTS])
        await engine.start()
        try:
            [run_id] = await engine.enqueue_plan(_plan(cluster.address, "test-crash-probe", budget="300s"))
            await _until(lambda: len(_stdout(engine.store, run_id, "tick ")) >= 3, 300, "ticks")
            return run_id
        finally:
            await engine.stop()       # the agent goes on in its container

    run_id = asyncio.run(first())
    [container] = _containers(docker_client, ray_home, run_id)
    assert container.status == "running"

    async def second():
        engine = Engine(Home.open(str(ray_home)), tasks_dirs=[TASKS], agents_dirs=[TEST_AGENTS])
        await engine.start()
        try:
            store = engine.store
            await _until(lambda: len(_stdout(store, run_id, "tick ")) >= 8, 300, "ticks after the re-adoption")
            assert _containers(docker_client, ray_home, run_id)[0].id == container.id
            await engine.cancel(run_id, "test over")
            [row] = await asyncio.wait_for(engine.wait_runs([run_id]), 300)
            _check_cancelled(store, row, run_id)
        finally:
            await engine.stop()

    asyncio.run(second())
    _until_gone(docker_client, ray_home, run_id, cluster.address)


def _until_gone(docker_client, ray_home, run_id, address):
    """No container of the run left, nor its actor (it exits once its container is gone). This
    process asks Ray itself (the engine's driver was a child process of the engine)."""
    import ray

    from autorl_tui.executors.ray import NAMESPACE, actor_name

    if not ray.is_initialized():
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, logging_level="WARNING")

    t0 = time.monotonic()
    while _containers(docker_client, ray_home, run_id):
        assert time.monotonic() - t0 < 60, "the run's container was left behind"
        time.sleep(0.3)
    t0 = time.monotonic()
    while True:
        try:
            ray.get_actor(actor_name(ray_home, run_id, 1), namespace=NAMESPACE)
        except ValueError:
            return
        assert time.monotonic() - t0 < 60, "the run's actor was left behind"
        time.sleep(0.3)


def test_a_containerized_agent_that_ignores_its_budget_is_killed_with_its_container(ray_cluster, ray_home,
                                                                                     docker_client):
    cluster, _, _ = ray_cluster

    async def go():
        engine = Engine(Home.open(str(ray_home)), tasks_dirs=[TASKS], agents_dirs=[TEST_AGENTS])
        await engine.start()
        try:
            [run_id] = await engine.enqueue_plan(_plan(cluster.address, "test-budget-hog", budget="20s"))
            [row] = await asyncio.wait_for(engine.wait_runs([run_id]), 600)
            [attempt] = engine.store.query("SELECT * FROM attempts WHERE run_id=?", (run_id,))
            [ready] = engine.store.query("SELECT message, data FROM events WHERE run_id=? AND message LIKE "
                                         "'workspace ready at %'", (run_id,))
            return row, attempt, _stdout(engine.store, run_id, "still here"), ready
        finally:
            await engine.stop()

    row, attempt, alive_lines, ready = asyncio.run(go())
    assert ready["message"].endswith("(agent runs in a container, as an unprivileged user)"), ready
    assert json.loads(ready["data"])["isolation"] == "container", ready["data"]
    assert row["state"] == "failed" and row["failure_source"] == "budget", (row["state"], row["end_reason"])
    assert alive_lines, "the agent never ran in its container"
    # SIGKILLed at the deadline: by the harness (-9), or by the container's own entry program when it
    # got there first (the container's status, 128 + 9)
    assert attempt["state"] == "killed" and (attempt["exit_code"] < 0 or attempt["exit_code"] == 137), attempt
    assert attempt["container_id"]
    assert row["ended_at"] - row["started_at"] < 20 + 30
    _until_gone(docker_client, ray_home, row["id"], cluster.address)


def _check_cancelled(store, row, run_id):
    assert row["state"] == "cancelled", (row["state"], row["end_reason"])
    messages = [e["message"] for e in store.query("SELECT message FROM events WHERE run_id=? ORDER BY id", (run_id,))]
    assert any("re-adopted" in m for m in messages)
    assert not any("reaped orphan container" in e["message"] for e in store.query("SELECT message FROM events"))
    ticks = _stdout(store, run_id, "tick ")
    assert ticks == [f"tick {i}" for i in range(len(ticks))] and len(ticks) >= 8      # no gap, no duplicate
    assert len(ticks) < 40          # it was stopped before its end


def _db(home):
    conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True, timeout=10)
    conn.row_factory = sqlite3.Row
    return conn


def _count(home, sql) -> int:
    try:
        return _db(home).execute(sql).fetchone()[0]
    except sqlite3.Error:
        return 0


def test_engine_killed_mid_run_re_adopts_the_containerized_actor(ray_cluster, ray_home, tmp_path, docker_client):
    """The local crash test's assertions with the agent in a container of a Ray node: kill -9 of
    the engine, `resume`, nothing lost or duplicated, the container kept (not reaped) and removed
    once it ended."""
    cluster, _, ray_tmp = ray_cluster
    plan = write_plan(tmp_path / "plan.yaml", agents=["test-crash-probe"], budget="300s", executor="ray",
                      gpus_per_run=0, cluster={"containers": True})
    env = dict(os.environ, PYTHONPATH=str(REPO), RAY_ADDRESS=cluster.address, RAY_TMPDIR=str(ray_tmp))
    cmd = [sys.executable, "-m", "autorl_tui", "--home", str(ray_home), "--agents-dir", str(TEST_AGENTS),
           "--tasks-dir", str(TASKS), "--plain", "--batch", str(plan)]
    engine = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        t0 = time.monotonic()
        while not (_count(ray_home, "SELECT COUNT(*) FROM submissions WHERE status='scored'") == 1
                   and _count(ray_home, "SELECT COUNT(*) FROM events WHERE message LIKE 'tick %'") >= 3):
            assert time.monotonic() - t0 < 400 and engine.poll() is None, "submission 1 scored and ticks"
            time.sleep(0.3)
    finally:
        engine.send_signal(signal.SIGKILL)
        engine.wait()
    before = _db(ray_home)
    events_before = [tuple(r) for r in before.execute("SELECT id, kind, message FROM events ORDER BY id")]
    run_id = before.execute("SELECT id FROM runs").fetchone()[0]
    before.close()
    [container] = _containers(docker_client, ray_home, run_id)
    assert container.status == "running"
    proc = cli("--agents-dir", str(TEST_AGENTS), "--tasks-dir", str(TASKS), "--plain", "resume", home=ray_home,
               timeout=500, env={"RAY_ADDRESS": cluster.address, "RAY_TMPDIR": str(ray_tmp)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    db = _db(ray_home)
    run = dict(db.execute("SELECT * FROM runs").fetchone())
    assert run["state"] == "done" and run["test_score"] is not None, run
    events_after = [tuple(r) for r in db.execute("SELECT id, kind, message FROM events ORDER BY id")]
    assert events_after[:len(events_before)] == events_before
    ticks = [m for _, k, m in events_after if k == "stdout" and m.startswith("tick ")]
    assert ticks == [f"tick {i}" for i in range(40)]
    assert [r[0] for r in db.execute("SELECT step FROM metrics WHERE name='tick' ORDER BY id")] == list(range(40))
    assert [r[0] for r in db.execute("SELECT status FROM submissions ORDER BY seq")] == ["scored", "scored"]
    assert any("re-adopted" in m for _, _, m in events_after)
    assert not any("reaped orphan container" in m for _, _, m in events_after)
    [attempt] = [dict(r) for r in db.execute("SELECT * FROM attempts")]
    assert attempt["state"] == "exited" and attempt["container_id"] == container.id
    t0 = time.monotonic()
    while _containers(docker_client, ray_home, run_id):
        assert time.monotonic() - t0 < 60, "the ended run's container was left behind"
        time.sleep(0.3)


def test_a_plan_whose_image_the_nodes_lack_is_refused_at_enqueue(ray_cluster, ray_home, tmp_path, docker_client):
    cluster, _, ray_tmp = ray_cluster
    plan = write_plan(tmp_path / "plan.yaml", executor="ray", gpus_per_run=0, image="autorl-test/no-such-image:never")
    proc = cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(plan), home=ray_home, timeout=300,
               env={"RAY_ADDRESS": cluster.address, "RAY_TMPDIR": str(ray_tmp)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "the plan asks for containers on the Ray nodes, but not every node can start them" in proc.stderr
    assert proc.stderr.count("image 'autorl-test/no-such-image:never' is not in its Docker Engine") == 3   # each node
    assert "Traceback" not in proc.stderr
    assert _count(ray_home, "SELECT COUNT(*) FROM runs") == 0


OLD_FORWARDER_CUT_S = 30.0     # the node's forwarder cut every call longer than this (issue 34)


@pytest.mark.long   # ~45 s of grading by design, minutes under load; the forwarder rule is in tests/unit/test_forwarder_long_calls.py
def test_a_containerized_agents_submit_outlasting_the_old_forwarder_cut_is_answered(ray_cluster, ray_home,
                                                                                    docker_client, tmp_path):
    """The agent's synchronous `/submit` waits for a dev grading longer than the 30 s the node's
    forwarder used to allow (a large dev split): answered 200 with the score, run done."""
    cluster, _, _ = ray_cluster
    tasks = slow_task(tmp_path, dev_n=1600, task_id="arith-long")

    async def go():
        async with retrying_engine(ray_home, tasks) as engine:
            [run_id] = await engine.enqueue_plan(one_run_plan("ray-long-submit", "arith-long", "test-gpu-probe",
                                                              cluster.address, gpus=0, containers=True))
            [row] = await asyncio.wait_for(engine.wait_runs([run_id]), 1200)
            store = engine.store
            assert row["state"] == "done", (row["state"], row["end_reason"])
            [sub] = store.query("SELECT status, score, grading_s FROM submissions WHERE run_id=?", (run_id,))
            assert sub["status"] == "scored", sub
            assert sub["grading_s"] > OLD_FORWARDER_CUT_S, f"the grading was too quick to test anything: {sub}"
            [answer] = _stdout(store, run_id, "submitted: ")       # urlopen raises on anything but 2xx
            assert json.loads(answer.split(": ", 1)[1])["score"] == sub["score"]

    asyncio.run(go())


def test_worker_removed_mid_run_kills_its_container_and_the_run_is_retried(ray_cluster, ray_home, docker_client):
    """Last in this module: it takes a worker away. The run asks 2 CPUs, which only a worker has."""
    cluster, workers, _ = ray_cluster

    async def go():
        engine = Engine(Home.open(str(ray_home)), tasks_dirs=[TASKS], agents_dirs=[TEST_AGENTS])
        engine.retry_policy = RetryPolicy(max_attempts=2, base_s=1.0)
        await engine.start()
        try:
            plan = parse_plan(f"name: lose\ntasks: [arith-small]\nagents: [test-crash-probe]\nmodels: [tiny]\n"
                              f"budget: 300s\nexecutor: ray\ncluster: {{address: '{cluster.address}', "
                              f"containers: true, cpus: 2}}\n")
            [run_id] = await engine.enqueue_plan(plan)
            store = engine.store
            await _until(lambda: len(_stdout(store, run_id, "tick ")) >= 3, 300, "ticks")
            [first] = store.query("SELECT * FROM attempts WHERE run_id=?", (run_id,))
            node_id = json.loads((Path(first["log_dir"]) / "ray.json").read_text())["node_id"]
            [node] = [w for w in workers if w.node_id == node_id]
            await asyncio.to_thread(cluster.remove_node, node, False)
            # The shim outlived its actor only to kill its container: none of attempt 1 is left.
            await _until(lambda: not any(c.labels.get("autorl.attempt") == "1"
                                         for c in _containers(docker_client, ray_home, run_id)), 120,
                         "attempt 1's container to go")
            [row] = await asyncio.wait_for(engine.wait_runs([run_id]), 600)
            attempts = store.query("SELECT * FROM attempts WHERE run_id=? ORDER BY number", (run_id,))
            return row, attempts, node_id
        finally:
            await engine.stop()

    row, attempts, lost_node = asyncio.run(go())
    assert [a["state"] for a in attempts] == ["lost", "exited"], [(a["state"], a["error"]) for a in attempts]
    # Said by the shim (it saw its actor die) or by the engine (it saw the node leave), whichever first.
    assert ("the run's Ray actor died" in attempts[0]["error"] or "left the Ray cluster" in attempts[0]["error"]), \
        attempts[0]["error"]
    assert row["state"] == "done" and row["test_score"] is not None, (row["state"], row["end_reason"])
    assert json.loads((Path(attempts[1]["log_dir"]) / "ray.json").read_text())["node_id"] != lost_node
    assert not _containers(docker_client, ray_home, row["id"])

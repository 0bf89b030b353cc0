"""`executor: ray` against a real local Ray cluster this module starts: a head (no GPUs) and two
worker nodes declaring 2 (fake) GPUs each. Runs are placed across the workers without
over-subscribing a node's GPUs, survive an engine kill -9 (the detached actors are re-adopted),
and a worker removed mid-run makes its run `lost` for that attempt and retried, the other run
unaffected. Ray's files stay under a temporary folder; the cluster is shut down at the end."""

import asyncio
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from functools import partial

from autorl_tui.catalog.plans import parse_plan
from autorl_tui.daemon.client import EngineClient
from autorl_tui.daemon.daemon import EngineOptions, pid_alive, start_daemon, stop_daemon
from autorl_tui.engine.engine import Engine
from autorl_tui.executors.ray import actor_name
from autorl_tui.isolation.sandbox_bwrap import visible_devices
from autorl_tui.engine.scheduling import RetryPolicy
from autorl_tui.exitcodes import ExitCode
from autorl_tui.home import Home
from tests.support.harness import REPO, TASKS, TEST_AGENTS, cli, write_plan
from tests.support.ray_cluster import GPUS_PER_NODE, ray_cluster, ray_home  # noqa: F401 (fixtures)
from tests.support.waiting import wait_for, wait_for_async

pytestmark = pytest.mark.slow


def _plan(address, agent, gpus, seeds, budget="240s"):
    return parse_plan(f"name: ray-{gpus}\ntasks: [arith-small]\nagents: [{agent}]\nmodels: [tiny]\nseeds: {seeds}\n"
                      f"budget: {budget}\nexecutor: ray\ngpus_per_run: {gpus}\ncluster: {{address: '{address}'}}\n")


def _attempts(store, run_id):
    return store.query("SELECT * FROM attempts WHERE run_id=? ORDER BY number", (run_id,))


def _ray_json(attempt) -> dict:
    return json.loads((Path(attempt["log_dir"]) / "ray.json").read_text())


def _stdout(store, run_id, prefix):
    return [e["message"] for e in store.query("SELECT message FROM events WHERE run_id=? AND kind='stdout' "
                                              "ORDER BY id", (run_id,)) if e["message"].startswith(prefix)]


def test_without_a_cluster_the_plan_is_refused_and_cluster_status_says_why(tmp_path):
    env = {"RAY_ADDRESS": ""}
    home = tmp_path / "home"
    plan = write_plan(tmp_path / "plan.yaml", executor="ray", gpus_per_run=1)
    proc = cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(plan), home=home, env=env, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "executor ray needs a cluster: set RAY_ADDRESS" in proc.stderr and "Traceback" not in proc.stderr
    if (home / "store.db").exists():       # validated before anything was queued
        assert _db(home).execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
    proc = cli("cluster", "status", home=home, env=env, timeout=120)
    assert proc.returncode == int(ExitCode.INFRA), proc.stdout + proc.stderr
    assert proc.stderr.startswith("autorl-tui: infrastructure error: no Ray cluster: executor ray needs a cluster: "
                                  "set RAY_ADDRESS") and "Traceback" not in proc.stderr, proc.stderr
    proc = cli("cluster", "status", "--json", home=home, env=env, timeout=120)
    assert proc.returncode == int(ExitCode.INFRA) and json.loads(proc.stdout)["connected"] is False
    wrong = write_plan(tmp_path / "wrong.yaml", executor="ray", gpus_per_run=1, cluster={"address": "127.0.0.1:1"})
    proc = cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(wrong), home=home, env=env, timeout=120)
    assert proc.returncode == 2 and "cannot reach the Ray head at 127.0.0.1:1" in proc.stderr, proc.stderr
    bad = write_plan(tmp_path / "bad.yaml", executor="local", cluster={"address": "x:1"})
    proc = cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(bad), home=home, env=env, timeout=120)
    assert proc.returncode == 2 and "`cluster` applies to executor ray only" in proc.stderr, proc.stderr


class SilentHead:
    """A TCP port that accepts connections and never answers: what a wrong port of a busy host,
    or a hung head, looks like to Ray (ray.init then waits for minutes). Records what clients send."""

    def __init__(self):
        self.listener = socket.socket()
        self.listener.bind(("0.0.0.0", 0))        # Ray dials the host's own address, not loopback
        self.listener.listen(64)
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.received = b""
        self._conns = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn):
        try:
            while chunk := conn.recv(4096):
                self.received += chunk
        except OSError:
            pass

    def close(self):
        for c in [self.listener, *self._conns]:
            c.close()


def test_the_engine_answers_clients_while_a_ray_connect_hangs(tmp_path):
    """Validating a ray plan connects to the cluster; against a head that never answers that takes
    minutes. Meanwhile the engine's loop serves other clients and the console."""
    head = SilentHead()
    home = Home.open(str(tmp_path / "h"))
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(REPO)
    try:
        info = start_daemon(home, EngineOptions(tasks_dirs=[TASKS]))
    finally:
        os.environ.pop("PYTHONPATH") if saved is None else os.environ.__setitem__("PYTHONPATH", saved)
    plan = (f"name: hang\ntasks: [arith-small]\nagents: [baseline-copy]\nmodels: [tiny]\nbudget: 60s\n"
            f"executor: ray\ncluster: {{address: '{head.address}'}}\n")

    async def go():
        async with await EngineClient.connect(home) as slow, await EngineClient.connect(home) as other:
            pending = asyncio.create_task(slow.enqueue_plan(plan))
            t0 = time.monotonic()
            while b"PRI * HTTP/2.0" not in head.received:       # Ray's gRPC client is talking to the head
                assert time.monotonic() - t0 < 120 and not pending.done(), "ray.init never reached the head"
                await asyncio.sleep(0.1)
            for _ in range(3):      # each within seconds, while the connect keeps hanging
                t1 = time.monotonic()
                assert (await asyncio.wait_for(other.ping(), 30))["pid"] == info["pid"]
                snapshot = await asyncio.wait_for(other.snapshot(), 30)
                assert snapshot["runs"] == []
                assert time.monotonic() - t1 < 30
            assert not pending.done(), "the connect was expected to be still hanging"
            pending.cancel()

    try:
        asyncio.run(go())
        # A connect still hanging in its thread does not keep the engine from stopping.
        stop_daemon(home, timeout=60)
    finally:
        head.close()
        if pid_alive(info["pid"]):
            os.kill(info["pid"], signal.SIGKILL)


def test_cluster_status_doctor_and_an_impossible_request(ray_cluster, ray_home, tmp_path):
    cluster, workers, ray_tmp = ray_cluster
    env = {"RAY_ADDRESS": cluster.address, "RAY_TMPDIR": str(ray_tmp)}
    proc = cli("cluster", "status", "--json", home=ray_home, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    gpus = {n["node_id"]: n["gpus"] for n in report["nodes"] if n["alive"]}
    assert gpus == {**{w.node_id: GPUS_PER_NODE for w in workers}, cluster.head_node.node_id: 0}
    proc = cli("doctor", home=ray_home, env=env, timeout=120)
    assert f"Ray cluster: {cluster.address}, 3 alive node(s), {2 * GPUS_PER_NODE} GPU(s)" in proc.stdout, proc.stdout
    plan = write_plan(tmp_path / "plan.yaml", executor="ray", gpus_per_run=GPUS_PER_NODE + 1)
    proc = cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(plan), home=ray_home, env=env, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no node of the Ray cluster can hold a run asking {'GPU': 3.0" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_runtime_env_ships_the_engine_s_settings_and_code_identity_to_each_node(ray_cluster, ray_home, monkeypatch):
    """The cluster's raylets were started without AUTORL_GRADER_MEMORY; the engine has it: a task
    pinned to each worker sees the engine's value (the job's runtime_env), and the engine's code
    identity, which equals the node's own, so validation lets the nodes through."""
    from autorl_tui.executors.ray import RayExecutor
    from autorl_tui.executors.ray_runtime import code_identity, node_software

    cluster, workers, _ = ray_cluster
    value = f"{os.getpid() % 97 + 2}g"                   # not in the raylets' environment
    monkeypatch.setenv("AUTORL_GRADER_MEMORY", value)
    executor = RayExecutor(home=ray_home, address=cluster.address)
    try:
        executor._ray()
        answers = executor._on_each_node([w.node_id for w in workers], node_software, what="the nodes' software")
        assert {a["node_id"] for a in answers} == {w.node_id for w in workers}
        for answer in answers:
            assert answer["ok"] and answer["code"] == code_identity(), answer
            assert answer["settings"]["AUTORL_GRADER_MEMORY"] == value, answer
        nodes = {n["NodeID"]: n for n in executor._nodes() if n.get("Alive")}
        executor.check_software(nodes)                    # no refusal: every node runs the engine's code
        assert executor._same_code == set(nodes)
    finally:
        executor.driver.close()


def test_six_runs_are_placed_across_nodes_without_oversubscription(ray_cluster, ray_home):
    cluster, workers, _ = ray_cluster
    worker_ids = {w.node_id for w in workers}

    async def go():
        engine = Engine(Home.open(str(ray_home)), tasks_dirs=[TASKS], agents_dirs=[TEST_AGENTS])
        await engine.start()
        try:
            ids = await engine.enqueue_plan(_plan(cluster.address, "test-gpu-probe", 1, [0, 1, 2, 3]))
            ids += await engine.enqueue_plan(_plan(cluster.address, "test-gpu-probe", 2, [0, 1]))
            await _console_and_cli_show_the_same_holdings(engine, ray_home, cluster.address, workers)
            rows = await asyncio.wait_for(engine.wait_runs(ids), 900)
            store = engine.store
            placed = []
            for row in rows:
                assert row["state"] == "done", (row["id"], row["state"], row["end_reason"])
                assert row["test_score"] is not None and row["baseline_score"] is not None
                subs = store.query("SELECT status, score FROM submissions WHERE run_id=?", (row["id"],))
                assert [s["status"] for s in subs] == ["scored"]
                [attempt] = _attempts(store, row["id"])
                where = _ray_json(attempt)
                assert where["node_id"] in worker_ids                     # never the GPU-less head
                assert len(where["gpu_ids"]) == row["gpus_requested"]
                # Ray's GPUs, as the sandbox shows them: only their nodes are bound, so CUDA numbers them from 0
                assert _stdout(store, row["id"], "devices ") == [f"devices {visible_devices(where['gpu_ids'])}"]
                assert _stdout(store, row["id"], "tick ") == [f"tick {i}" for i in range(12)]
                steps = [m["step"] for m in store.query("SELECT step FROM metrics WHERE run_id=? AND name='tick' "
                                                        "ORDER BY id", (row["id"],))]
                assert steps == list(range(12))
                # When the actor held its GPUs: from the actor's start on the node to the shim's end (the
                # engine's attempt times are when it asked Ray and when it saw the end).
                ended = json.loads((Path(attempt["log_dir"]) / "exit.json").read_text())["ended_at"]
                placed.append((where["node_id"], set(where["gpu_ids"]), where["placed_at"], ended))
                # Its gradings ran as Ray work: the dev submission on the agent's node and GPUs, the
                # held-out test, after the agent's actor exited, seated in the run's placement group:
                # the same node and GPUs, kept for it (fake GPUs: graded on CPU).
                graded = _graded_where(store, row["id"])
                assert graded["dev"] == {"node_id": where["node_id"], "gpu_ids": where["gpu_ids"], "device": "cpu"}
                assert graded["test"] == graded["dev"], graded
            # The baselines too were graded on the cluster, once for the plan (cached per task and model).
            bases = [_graded_where(store, r["id"], baselines=True) for r in rows]
            [base] = [b for b in bases if b]
            assert set(base) == {"dev", "test"} and {b["node_id"] for b in base.values()} <= worker_ids
            # Each attempt's placement group was on its run's node, and was removed when the run ended.
            groups = await asyncio.to_thread(_groups_of, cluster.address, ray_home)
            for row in rows:
                [attempt] = _attempts(store, row["id"])
                group = groups[actor_name(ray_home, row["id"], 1)]
                assert group["bundles_to_node_id"][0] == _ray_json(attempt)["node_id"], group
                assert group["bundles"][0]["GPU"] == row["gpus_requested"] and group["strategy"] == "STRICT_PACK"
            assert {g["state"] for g in groups.values()} == {"REMOVED"}, groups
            # Graded on the cluster, scored exactly as the engine's host grades the same snapshot.
            [sub] = store.query("SELECT * FROM submissions WHERE run_id=?", (rows[0]["id"],))
            for split, score in (("dev", sub["score"]), ("test", rows[0]["test_score"])):
                assert await _local_score(ray_home, sub["snapshot_path"], split) == score
            return placed
        finally:
            await engine.stop()

    placed = asyncio.run(go())
    assert {p[0] for p in placed} == worker_ids                           # both workers were used
    overlaps = 0
    for i, (node_a, gpus_a, start_a, end_a) in enumerate(placed):
        for node_b, gpus_b, start_b, end_b in placed[i + 1:]:
            if node_a == node_b and start_a < end_b and start_b < end_a:
                overlaps += 1
                assert not gpus_a & gpus_b, "two runs held the same GPU of a node at the same time"
    busy = [(s, e, n, len(g)) for n, g, s, e in placed]
    for start, _, node, _ in busy:      # at every start, the GPUs held on each node fit in it
        held = sum(k for s, e, n, k in busy if n == node and s <= start < e)
        assert held <= GPUS_PER_NODE
    assert any(s1 < e2 and s2 < e1 and n1 != n2 for s1, e1, n1, _ in busy for s2, e2, n2, _ in busy), \
        "no two runs ever ran at once on different nodes"


def _groups_of(address: str, home) -> dict[str, dict]:
    """The placement groups of this home's runs, by name, once none is being removed any more
    (the engine removes a run's group when the run ends, without waiting for Ray)."""
    from autorl_tui.executors.ray import connect
    from autorl_tui.executors.ray_groups import run_prefix

    ray = connect(address)
    prefix = run_prefix(home, "")[:-2]
    deadline = time.monotonic() + 120
    while True:
        groups = {g["name"]: g for g in ray.util.placement_group_table().values() if g["name"].startswith(prefix)}
        if all(g["state"] == "REMOVED" for g in groups.values()) or time.monotonic() > deadline:
            return groups
        time.sleep(0.5)


def _graded_where(store, run_id, baselines: bool = False) -> dict:
    """split -> where the run's grading on it ran (the `where` of the grading's end event), of its
    submissions' gradings or (`baselines`) of the base model's."""
    out = {}
    for e in store.query("SELECT data FROM events WHERE run_id=? AND kind='grading'", (run_id,)):
        data = json.loads(e["data"]) if isinstance(e["data"], str) else e["data"]
        if data.get("phase") == "end" and "where" in data and bool(data.get("baseline")) == baselines:
            assert data.get("score") is not None and data["split"] not in out, data
            out[data["split"]] = {k: data["where"][k] for k in ("node_id", "gpu_ids", "device")}
    return out


async def _local_score(home, snapshot: str, split: str) -> float:
    from autorl_tui.catalog.tasks import find_task, materialize
    from autorl_tui.grading_host.grading_client import run_grader

    card = find_task("arith-small", [TASKS])
    request = {"task": card.to_dict(), "split": split, "model_path": snapshot, "protocol": card.protocol.to_dict(),
               "split_path": str(materialize(card, split, Home.open(str(home)).cache / "tasks")),
               "scorer": card.scorer, "scorer_options": card.scorer_options, "backend": "transformers",
               "device": "cpu", "threads": 1, "seed": card.protocol.seed, "limit": None}
    outcome = await run_grader(request, Path(home).parent / "local-gradings" / split, timeout_s=600)
    assert outcome.ok, outcome.error
    return outcome.score


async def _console_and_cli_show_the_same_holdings(engine, home, address, workers):
    """While runs hold GPUs: the engine's cluster view (what the GPUs screen gets, in the snapshot
    and as ClusterChanged events) lists the nodes with their GPUs and the attempts placed on them,
    as `autorl-tui cluster status` does."""
    def held(state):
        return {n["node_id"]: [(h["run_id"], h["attempt"], h["gpu_ids"]) for h in n["runs"]] for n in state["nodes"]}

    from autorl_tui.engine.events import ClusterChanged

    sub, t0 = engine.bus.subscribe(), time.time()
    try:
        while True:      # the console hears of the placements as ClusterChanged events
            assert time.time() - t0 < 300, "no ClusterChanged event ever showed an attempt placed on a node"
            if any(isinstance(e, ClusterChanged) and e.cluster["connected"] and any(held(e.cluster).values())
                   for e in sub.drain()):
                break
            await asyncio.sleep(0.2)
    finally:
        sub.close()
    state = engine.cluster_state()
    assert {n["node_id"]: n["gpus"] for n in state["nodes"] if n["alive"]} == \
        {**{w.node_id: GPUS_PER_NODE for w in workers}, **{n["node_id"]: 0 for n in state["nodes"]
                                                          if n["node_id"] not in {w.node_id for w in workers}}}
    for _ in range(5):        # runs start and end meanwhile: compare when the engine's view held still
        before = held(engine.cluster_state())
        proc = await asyncio.to_thread(cli, "cluster", "status", "--json", home=home, env={"RAY_ADDRESS": address},
                                       timeout=120)
        after = held(engine.cluster_state())
        if before == after:
            assert held(json.loads(proc.stdout)) == before
            return
    raise AssertionError("the engine's view never held still across a `cluster status`")


def _db(home):
    conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True, timeout=10)
    conn.row_factory = sqlite3.Row
    return conn


# The engine writes the store meanwhile: a locked read means "not yet".
_wait_for = partial(wait_for, interval=0.3, tolerate=(sqlite3.Error,))


def test_engine_killed_mid_run_re_adopts_the_ray_actor(ray_cluster, ray_home, tmp_path):
    """The local crash test's assertions, with the agent in a detached actor on a worker node."""
    cluster, workers, ray_tmp = ray_cluster
    plan = write_plan(tmp_path / "plan.yaml", agents=["test-crash-probe"], budget="240s", executor="ray",
                      gpus_per_run=1)
    env = dict(os.environ, PYTHONPATH=str(REPO), RAY_ADDRESS=cluster.address, RAY_TMPDIR=str(ray_tmp))
    cmd = [sys.executable, "-m", "autorl_tui", "--home", str(ray_home), "--agents-dir", str(TEST_AGENTS),
           "--tasks-dir", str(TASKS), "--plain", "--batch", str(plan)]
    engine = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: _db(ray_home).execute("SELECT COUNT(*) FROM submissions WHERE status='scored'").fetchone()[0] == 1,
                  300, "submission 1 to be scored")
        _wait_for(lambda: _db(ray_home).execute("SELECT COUNT(*) FROM events WHERE message LIKE 'tick %'").fetchone()[0] >= 3,
                  60, "ticks")
    finally:
        engine.send_signal(signal.SIGKILL)
        engine.wait()
    before = _db(ray_home)
    events_before = [tuple(r) for r in before.execute("SELECT id, kind, message FROM events ORDER BY id")]
    sub_before = dict(before.execute("SELECT * FROM submissions WHERE seq=1").fetchone())
    assert before.execute("SELECT state FROM runs").fetchone()[0] == "running"
    before.close()
    proc = cli("--agents-dir", str(TEST_AGENTS), "--tasks-dir", str(TASKS), "--plain", "resume", home=ray_home,
               timeout=500, env={"RAY_ADDRESS": cluster.address, "RAY_TMPDIR": str(ray_tmp)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    db = _db(ray_home)
    run = dict(db.execute("SELECT * FROM runs").fetchone())
    assert run["state"] == "done", run
    events_after = [tuple(r) for r in db.execute("SELECT id, kind, message FROM events ORDER BY id")]
    assert events_after[:len(events_before)] == events_before          # nothing recorded before was lost
    ticks = [m for _, k, m in events_after if k == "stdout" and m.startswith("tick ")]
    assert ticks == [f"tick {i}" for i in range(40)]                     # no line lost or duplicated
    metric_steps = [r[0] for r in db.execute("SELECT step FROM metrics WHERE name='tick' ORDER BY id")]
    assert metric_steps == list(range(40))
    subs = [dict(r) for r in db.execute("SELECT * FROM submissions ORDER BY seq")]
    assert subs[0]["score"] == sub_before["score"] and subs[0]["content_hash"] == sub_before["content_hash"]
    assert [s["status"] for s in subs] == ["scored", "scored"]
    assert run["test_score"] is not None
    assert any("re-adopted" in m for _, _, m in events_after)
    [attempt] = [dict(r) for r in db.execute("SELECT * FROM attempts")]
    assert attempt["state"] == "exited" and _ray_json(attempt)["node_id"] in {w.node_id for w in workers}


def test_a_node_that_cannot_see_the_home_refuses_the_plan(ray_cluster, ray_home, tmp_path):
    """A worker started in its own mount namespace with an empty tmpfs over the home's parent:
    the same cluster, a node blind to the home."""
    cluster, workers, ray_tmp = ray_cluster
    env = {"RAY_ADDRESS": cluster.address, "RAY_TMPDIR": str(ray_tmp)}
    ray_cli = Path(sys.executable).parent / "ray"
    node = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         f"mount -t tmpfs blind {ray_home.parent} && exec {ray_cli} start --address={cluster.address} "
         f"--num-cpus=1 --num-gpus=0 --resources='{{\"blind\": 1}}' --block --disable-usage-stats"],
        env=dict(os.environ, PYTHONPATH=str(REPO), **env), start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def nodes():
            proc = cli("cluster", "status", "--json", home=ray_home, env=env, timeout=120)
            return [n for n in json.loads(proc.stdout)["nodes"] if n["alive"]]
        _wait_for(lambda: any("blind" in n["resources"] for n in nodes()), 120, "the blind node to join")
        plan = write_plan(tmp_path / "plan.yaml", executor="ray", gpus_per_run=1)
        proc = cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(plan), home=ray_home, env=env, timeout=300)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert f"the home {ray_home} is not visible on Ray node(s)" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
        assert _db(ray_home).execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
    finally:
        os.killpg(node.pid, signal.SIGTERM)
        node.wait(60)
    _wait_for(lambda: not any("blind" in n["resources"] for n in nodes()), 120, "the blind node to leave")


def test_worker_removed_mid_run_loses_only_its_run_which_is_retried(ray_cluster, ray_home, monkeypatch):
    """Last in this module: it takes a worker away. Both runs hold after tick 2 until the test
    releases them (HOLD_FILE, crash_probe.py), so the victim is surely mid-run when its node goes,
    however slowly a loaded machine starts the other; the retry, started after the release, runs through."""
    cluster, workers, _ = ray_cluster
    gate = ray_home.parent / "gate"           # under the home's 0711 folder: the agents' uids reach it
    gate.mkdir(mode=0o755)
    monkeypatch.setenv("HOLD_FILE", str(gate / "released"))
    plan = parse_plan(f"name: ray-2\ntasks: [arith-small]\nagents: [test-crash-probe]\nmodels: [tiny]\nseeds: [0, 1]\n"
                      f"budget: 900s\nexecutor: ray\ngpus_per_run: 2\ncluster: {{address: '{cluster.address}'}}\n"
                      f"agent_overlays: {{test-crash-probe: {{env: [HOLD_FILE], binds: ['{gate}']}}}}\n")

    async def go():
        engine = Engine(Home.open(str(ray_home)), tasks_dirs=[TASKS], agents_dirs=[TEST_AGENTS])
        engine.retry_policy = RetryPolicy(max_attempts=2, base_s=1.0)
        await engine.start()
        try:
            # Two GPUs each: one run per worker node.
            ids = await engine.enqueue_plan(plan)
            store = engine.store
            await wait_for_async(lambda: all(_stdout(store, r, "holding") for r in ids), 600,
                                 "both runs to hold after tick 2", interval=0.5)
            victim, other = ids
            node_id = _ray_json(_attempts(store, victim)[0])["node_id"]
            assert node_id != _ray_json(_attempts(store, other)[0])["node_id"]
            [node] = [w for w in workers if w.node_id == node_id]
            await asyncio.to_thread(cluster.remove_node, node, False)
            # Ray's verdict on the node, however long a loaded head takes to give it.
            lost = await wait_for_async(lambda: [a for a in _attempts(store, victim) if a["state"] == "lost"], 600,
                                        "the victim's attempt to be lost", interval=0.5)
            assert "left the Ray cluster" in lost[0]["error"]
            assert [a["state"] for a in _attempts(store, other)] == ["running"]
            (gate / "released").touch()
            rows = {r["id"]: r for r in await asyncio.wait_for(engine.wait_runs(ids), 900)}
            attempts = {r: _attempts(store, r) for r in ids}
            assert [a["state"] for a in attempts[victim]] == ["lost", "exited"]
            assert rows[victim]["state"] == "done" and rows[victim]["test_score"] is not None
            # The retry ran on the remaining worker.
            assert _ray_json(attempts[victim][1])["node_id"] != node_id
            assert rows[other]["state"] == "done" and [a["state"] for a in attempts[other]] == ["exited"]
            assert _stdout(store, other, "tick ") == [f"tick {i}" for i in range(40)]
            subs = store.query("SELECT status FROM submissions WHERE run_id=?", (other,))
            assert [s["status"] for s in subs] == ["scored", "scored"]
        finally:
            await engine.stop()

    asyncio.run(go())

"""Gradings of `executor: ray` runs as Ray work on the cluster (docs/cluster.md, "Grading").

A dev submission is graded on the node that runs the agent, on the run's GPUs (as a local run's
gradings share the run's devices); the held-out test, graded after the agent's actor has exited,
is seated in the run's placement group (executors/ray_groups.py: the attempt's group, named as
its actor), on the same node and GPUs, which the group kept for it. The baselines, graded before
the attempt's group exists, and a grading whose node died reserve a group of their own for the
run's GPU count (preferring the node admission packed the run on), removed when they end. Baselines stay cached per task and model
(run_grading.py), so a plan's runs grade them once. Either way the grading is a call to the node's
grading actor (one per node and home, owned by the engine: it ends with it), which runs the
engine's own grader there, `grading_client.run_grader`: the same bubblewrap sandbox as a leased
uid, the same limits, the node's warm grader between gradings. The snapshot and the split are read
from the shared home; the result goes back to the engine, which alone writes the store. The node
it ran on is returned in `GradingOutcome.where`. The Ray side runs in the engine's driver process
(`grade_in_driver`, called through ray_driver.py); the engine's side (`grade_on_cluster`) waits for
it and reads the grading's progress."""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import threading
import time
from dataclasses import asdict, fields
from pathlib import Path

from autorl_tui.executors import ray_groups
from autorl_tui.executors.base import ExecutorError
from autorl_tui.executors.ray import NAMESPACE, ClusterUnreachable, off_loop, reach_cluster
from autorl_tui.grading_host.grading_client import (GradingOutcome, ProgressCallback, run_grader, timed_out_outcome,
                                            wait_with_progress)
from autorl_tui.grading.placement import Placement

LEASE_TIMEOUT_S = 300.0       # Ray must find the test grading's GPUs within this
RESULT_GRACE_S = 60.0         # beyond the grading's own limit (enforced on the node) before the engine gives up

_actors: dict[str, object] = {}       # grading actor name -> handle, the ones this engine made
_actors_lock = threading.Lock()


class NodeGrader:
    """The grading actor of one node (wrapped by `ray.remote`). Async: several gradings at once,
    each in its own sandbox; its process keeps the node's warm grader between them."""

    def where(self) -> dict:
        import ray

        return {"node_id": ray.get_runtime_context().get_node_id(), "hostname": socket.gethostname()}

    async def grade(self, request: dict, work_dir: str, gpu_ids: list[str], threads: int,
                    timeout_s: float | None, choice: dict | None = None) -> dict:
        placement = node_placement(request, gpu_ids, choice)
        request = {**request, "backend": placement.backend, "device": placement.device,
                   "placement": placement.to_dict()}
        outcome = await run_grader(request, Path(work_dir), gpus=list(placement.devices) or gpu_ids, threads=threads,
                                   timeout_s=timeout_s)
        outcome.placement = {**placement.to_dict(), **(outcome.placement or {})}
        return {**asdict(outcome), "where": {**self.where(), "gpu_ids": list(gpu_ids), "device": placement.device}}


def node_placement(request: dict, gpu_ids: list[str], choice: dict | None, *, real_ids: list[str] | None = None,
                   nvml=None) -> Placement:
    """On the node, the plan's grading choice (`grading:`) applied to the GPUs Ray gave this grading
    (its run's, or leased for it), sized from their free memory there (grading/placement.py). A
    `pool` names GPUs of the engine's host: on a cluster the grading's GPUs are Ray's, so it is
    decided as `shared` over them. A node whose GPUs are only declared to Ray (a test cluster)
    has none torch can use: the CPU, said in the reason."""
    from autorl_tui.catalog.protocol import EvalProtocol
    from autorl_tui.executors.gpus import inventory
    from autorl_tui.grading_host.grading_placement import place

    real = inventory(None).ids if real_ids is None else real_ids
    if not gpu_ids or not real:
        why = "no GPU for this grading" if not gpu_ids else "the node's GPUs are declared to Ray only (no device here)"
        return Placement("transformers", "cpu", (), "cpu", reason=why)
    options = {"grading": {**{k: v for k, v in (choice or {}).items() if k != "pool_gpus"}, "placement": "shared"}}
    return place(options, [str(g) for g in gpu_ids], Path(request["model_path"]),
                 EvalProtocol.from_dict(request.get("protocol")), None, nvml)


def _grader_name(home: Path, node_id: str) -> str:
    digest = hashlib.sha256(str(Path(home).resolve()).encode()).hexdigest()[:12]
    return f"autorl-grader-{digest}-{node_id[:16]}"


def _grader(ray, home: Path, node_id: str):
    """The node's grading actor, made on first use (pinned to the node, no resources of its own:
    it grades on GPUs a placement group holds: its run's, or the grading's own)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    name = _grader_name(home, node_id)
    with _actors_lock:
        if name not in _actors:
            _actors[name] = ray.remote(NodeGrader).options(
                name=name, namespace=NAMESPACE, get_if_exists=True, num_cpus=0, max_restarts=0,
                max_concurrency=64, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote()
        return _actors[name]


def close_all() -> None:
    """The engine stops: its grading actors (and their warm graders) go."""
    import sys

    ray = sys.modules.get("ray")
    with _actors_lock:
        actors = list(_actors.values())
        _actors.clear()
    # Another thread may be importing ray right now (a cluster view's first poll): not connected.
    if ray is None or not getattr(ray, "is_initialized", lambda: False)():
        return
    for actor in actors:
        try:
            ray.kill(actor, no_restart=True)
        except Exception:       # already gone with its node
            pass


async def _seat(ray, group, gpus: int) -> dict:
    """Where a group's bundle is and its GPUs (ray_groups.seat), within LEASE_TIMEOUT_S
    (asyncio.TimeoutError past it)."""
    ref = await off_loop(ray_groups.seat, ray, group, gpus)
    try:
        return await asyncio.wait_for(asyncio.wrap_future(ref.future()), LEASE_TIMEOUT_S)
    except BaseException:
        await off_loop(ray.cancel, ref)
        raise


async def _own_group(ray, gpus: int, prefer_node: str | None):
    """A grading without its run's group (the baselines; a grading whose node died): a group of
    its own for `gpus` GPUs, preferring `prefer_node`, and where it is; (None, where) for no GPU
    (seated on the preferred node, or where Ray likes). Not detached: it goes with the driver."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if gpus <= 0:
        strategy = NodeAffinitySchedulingStrategy(prefer_node, soft=True) if prefer_node else "DEFAULT"
        ref = ray.remote(ray_groups._seated).options(num_cpus=0, max_retries=0, scheduling_strategy=strategy).remote()
        return None, await asyncio.wait_for(asyncio.wrap_future(ref.future()), LEASE_TIMEOUT_S)
    group = await off_loop(lambda: ray_groups.reserve(ray, [{"GPU": float(gpus)}], node=prefer_node))
    try:
        return group, await _seat(ray, group, gpus)
    except BaseException:
        await off_loop(ray_groups.remove, ray, group)
        raise


async def _run_group(ray, agent_where: dict | None, gpus: int) -> dict | None:
    """The run's own group, when it still is (named as its actor: ray_groups): where its bundle is
    and its GPUs, once its actor has exited (the held-out test); None without one."""
    name = (agent_where or {}).get("actor")
    group = await off_loop(ray_groups.find, ray, name) if name else None
    return None if group is None else await _seat(ray, group, gpus)


async def _node_left(ray, node_id: str) -> bool:
    """Whether Ray declares the node dead within NODE_VERDICT_S (its health checks take seconds
    after a raylet dies; an actor's death may be reported first)."""
    from autorl_tui.executors.ray import NODE_VERDICT_S, alive_nodes

    deadline = time.monotonic() + NODE_VERDICT_S
    while time.monotonic() < deadline:
        if node_id not in await off_loop(alive_nodes, ray):
            return True
        await asyncio.sleep(1)
    return False


async def grade_on_cluster(executor, request: dict, work_dir: Path, *, agent_where: dict | None, gpus: int,
                           threads: int, timeout_s: float | None, run_id: str | None = None,
                           on_progress: ProgressCallback | None = None, choice: dict | None = None) -> GradingOutcome:
    """One grading of a ray run on a node of the cluster (see the module's docstring), done by the
    engine's driver process (`grade_in_driver`) while the engine reads its progress from the
    shared home. agent_where: where the run's agent was placed (ray.json) and whether it is still
    `alive`; None before it was (the baselines: preferring the node admission packed the run on).
    When the cluster goes away under the grading (its head down: the driver process is lost), the
    grading waits for it (CLUSTER_WAIT_S) and is graded again from the start, on GPUs of a group
    of its own; the outcome's `where` says so (`cluster_lost`)."""
    work_dir = Path(os.path.abspath(work_dir))
    work_dir.mkdir(parents=True, exist_ok=True)
    t0, cluster_lost = time.time(), 0
    limit = None if timeout_s is None else timeout_s + RESULT_GRACE_S
    while True:
        try:
            await reach_cluster(executor)       # a resumed run's test grading may wait for the cluster
        except ClusterUnreachable as exc:
            return GradingOutcome(ok=False, error_kind="internal", error=str(exc))
        future = executor.driver.call("grade", executor.address, str(executor.home), request, str(work_dir),
                                      agent_where, gpus, threads, timeout_s, executor.packed_node(run_id), choice)
        waiter = asyncio.ensure_future(asyncio.wrap_future(future))
        try:
            await wait_with_progress(waiter, work_dir, limit, on_progress)    # the progress file is on the shared home
        except asyncio.TimeoutError:
            executor.driver.cancel(future)
            return timed_out_outcome(timeout_s, t0)
        except asyncio.CancelledError:
            executor.driver.cancel(future)
            raise
        try:
            answer = waiter.result()
        except ClusterUnreachable:
            cluster_lost += 1
            # Its node's fate is unknown, and its actor may still hold the run's group: GPUs of its own.
            agent_where = {**agent_where, "alive": False, "actor": None} if agent_where else None
            continue
        except ExecutorError as exc:
            return GradingOutcome(ok=False, error_kind="internal", error=f"the grading on the Ray cluster failed: {exc}")
        known = {f.name for f in fields(GradingOutcome)}
        outcome = GradingOutcome(**{k: v for k, v in answer.items() if k in known})
        if cluster_lost and outcome.where is not None:
            outcome.where = {**outcome.where, "cluster_lost": cluster_lost}
        return outcome


async def grade_in_driver(ray, home: str, request: dict, work_dir: str, agent_where: dict | None, gpus: int,
                          threads: int, timeout_s: float | None, packed_node: str | None,
                          choice: dict | None = None) -> dict:
    """In the engine's driver process (ray_driver.py): the grading on a node's grading actor, on
    the agent's GPUs (its node, while it lives), on its run's placement group once the agent has
    exited, or on a group of its own (ray_groups). A grading whose node leaves the cluster is
    graded again from the start on another node (the snapshot and the split are on the shared
    home), on a group of its own there: the lost nodes are named in the outcome's
    `where` (`lost_nodes`), and the submission ends as that grading does. The engine enforces the
    time limit (it cancels this call)."""
    held, lost_nodes = None, []        # a group of the grading's own (ray_groups), removed at the end

    async def place(prefer: str | None, agent: dict | None):
        nonlocal held
        if held is not None:
            await off_loop(ray_groups.remove, ray, held)
            held = None
        got = await _run_group(ray, agent, gpus)
        if got is None:
            held, got = await _own_group(ray, gpus, prefer)
        return got["node_id"], got["gpu_ids"]

    try:
        try:
            if agent_where and agent_where.get("alive") and agent_where.get("node_id"):
                node_id, gpu_ids = agent_where["node_id"], [str(g) for g in agent_where.get("gpu_ids", [])]
            else:
                node_id, gpu_ids = await place((agent_where or {}).get("node_id") or packed_node, agent_where)
        except asyncio.TimeoutError:
            return asdict(_no_gpus(gpus))
        same_node_retry = True
        while True:
            actor = await off_loop(_grader, ray, Path(home), node_id)
            ref = actor.grade.remote(request, work_dir, gpu_ids, threads, timeout_s, choice)
            try:
                answer = await asyncio.wrap_future(ref.future())
            except asyncio.CancelledError:
                await off_loop(ray.cancel, ref)
                raise
            except ray.exceptions.RayError as exc:
                with _actors_lock:
                    _actors.pop(_grader_name(Path(home), node_id), None)
                if isinstance(exc, ray.exceptions.RayActorError) and await _node_left(ray, node_id):
                    lost_nodes.append(node_id)
                    try:
                        node_id, gpu_ids = await place(None, None)      # a group of its own: the dead node is no candidate
                    except asyncio.TimeoutError:
                        return asdict(_no_gpus(gpus))
                    continue
                if same_node_retry and isinstance(exc, ray.exceptions.RayActorError):
                    same_node_retry = False
                    continue      # the actor was gone (made by an engine that died): once more with a new one
                cause = str(getattr(exc, "cause", None) or exc).strip().splitlines()
                return asdict(GradingOutcome(ok=False, error_kind="internal",
                                             error=f"the grading on Ray node {node_id[:12]} failed: "
                                                   f"{cause[-1] if cause else exc}"))
            if lost_nodes and answer.get("where") is not None:
                answer["where"] = {**answer["where"], "lost_nodes": lost_nodes}
            return answer
    finally:
        if held is not None:
            await off_loop(ray_groups.remove, ray, held)


def _no_gpus(gpus: int) -> GradingOutcome:
    return GradingOutcome(ok=False, error_kind="internal",
                          error=f"the Ray cluster had no node with {gpus} free GPU(s) for the grading "
                                f"within {LEASE_TIMEOUT_S:.0f} s")

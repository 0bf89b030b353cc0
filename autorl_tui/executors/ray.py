"""Ray executor: each run attempt is a detached, named Ray actor that holds the run's resources on
the node Ray picks and starts the agent there with the local executor's semantics (shim, sandbox,
deadline; `ray_node.py`), or in a container of the node's Docker Engine when the plan asks for
containers (the docker executor's code, `docker_shim.py`). docs/cluster.md.

Requirements it checks: the home is on a filesystem every node mounts at the same path (each
node must see a marker file in it), and the engine reaches the cluster (`RAY_ADDRESS` or the
plan's `cluster: {address: ...}`). Logs, metrics and `exit.json` travel through the shared home,
so the engine tails them exactly as for local runs. The actor's name is derived from the home and
the attempt, so a restarted engine finds it again (`adopt`)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import threading
import time
from pathlib import Path

from autorl_tui.executors.base import AgentHandle, Executor, ExecutorError, LaunchSpec
from autorl_tui.executors.docker_shim import container_launch
from autorl_tui.executors.local import _read_json, launch_of, wait_for_shim
from autorl_tui.executors.ray_client import ClusterUnreachable, DriverError, DriverProcess
from autorl_tui.executors.ray_groups import bundles, run_prefix
from autorl_tui.executors.ray_placement import Request, admit, feasible
from autorl_tui.executors.ray_runtime import runtime_env
from autorl_tui.executors.ray_view import ClusterView, cluster_state
from autorl_tui.exitcodes import UsageError
from autorl_tui import settings

NAMESPACE = "autorl-tui"
INSTALL = "install the extra: pip install 'autorl-tui[ray]'"
PING_EVERY_S = 2.0
UNREACHABLE_LIMIT = 15        # consecutive failed pings on an alive node before the run counts as lost
NODE_VERDICT_S = 60.0         # after its actor died, how long (wall time) to wait for Ray to say whether the node
                              # is gone (its health checks take ~15 s idle, longer on a loaded head)
CONNECT_TIMEOUT_S = 120.0     # a head that accepts connections but never answers
KILL_GRACE_S = 5.0            # for the shim to end the agent before the actor itself is killed
KILL_GRACE_CONTAINER_S = 30.0  # a container's: Docker kills it, the log pumps drain, exit.json is written
CLUSTER_WAIT_S = 900.0        # resume: how long a run waits for an unreachable cluster before its attempt is lost
CLUSTER_RETRY_S = 2.0         # meanwhile, how often the engine tries to connect
PING_TIMEOUT_S = 10.0         # an actor's answer to a liveness ping
DRIVER_LOG = "ray-driver.log"   # in the home: the engine's Ray driver process's output (Ray's own logging)

_connect_lock = threading.Lock()

__all__ = ["ClusterUnreachable"]      # re-exported: ray_grading and the driver name it from here


def actor_name(home: Path, run_id: str, attempt: int) -> str:
    """The attempt's actor's name, and its placement group's (ray_groups)."""
    return f"{run_prefix(home, run_id)}{attempt}"


def cluster_address(placement: dict | None = None) -> str | None:
    return (placement or {}).get("address") or os.environ.get("RAY_ADDRESS") or None


def connect(address: str | None):
    """`ray.init` once per process (Ray allows one cluster per driver). Blocking (up to
    CONNECT_TIMEOUT_S). The engine never calls it: its driver process does (ray_driver.py); the
    CLI's `cluster status` and `doctor` do, briefly."""
    try:
        import ray
    except ImportError:
        raise ExecutorError(f"executor ray needs the ray package: {INSTALL}") from None
    with _connect_lock:
        if ray.is_initialized():
            return ray
        if not address:
            raise ExecutorError("executor ray needs a cluster: set RAY_ADDRESS=HOST:PORT (the head's GCS address, "
                                "as `ray start --head` prints it) or `cluster: {address: HOST:PORT}` in the plan")
        _reachable(address)
        # Never from the main thread: there ray.init replaces the process's SIGTERM handler with
        # sys.exit, which would take the engine's own shutdown handling away. A daemon thread: a
        # head that never answers must not keep the engine's process from exiting.
        failure: list[BaseException] = []

        def init() -> None:
            quiet = logging.getLogger("ray._private.worker")
            level = quiet.level
            quiet.setLevel(logging.ERROR)      # "SIGTERM handler is not set ...": that is the point
            try:
                # runtime_env: the engine's settings and code identity, set in every worker of the
                # job on every node (ray_runtime.py); the code itself must be on the nodes already.
                ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, logging_level="WARNING",
                         configure_logging=False, runtime_env=runtime_env())
            except Exception as exc:    # ConnectionError, a timeout, a version mismatch
                failure.append(exc)
            finally:
                quiet.setLevel(level)

        thread = threading.Thread(target=init, name="ray-connect", daemon=True)
        thread.start()
        thread.join(CONNECT_TIMEOUT_S)
        if thread.is_alive():
            raise ClusterUnreachable(f"the Ray head at {address} accepts connections but did not answer within "
                                f"{CONNECT_TIMEOUT_S:.0f} s; is it a Ray GCS port (`ray status --address {address}`)?")
        if failure:
            raise ClusterUnreachable(f"cannot connect to the Ray cluster at {address}: {failure[0]}")
    return ray


async def off_loop(fn, *args):
    """`fn(*args)` in a daemon thread, awaited: Ray calls that can block for minutes (connecting,
    waiting for a node) never hold the engine's event loop, and a hung one never holds its exit
    (asyncio.to_thread's pool is joined when the process exits)."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(result, error) -> None:
        if not future.done():
            future.set_exception(error) if error is not None else future.set_result(result)

    def work() -> None:
        try:
            result, error = fn(*args), None
        except BaseException as exc:      # handed to the awaiting coroutine
            result, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:              # the loop is closed: nobody waits any more
            pass

    threading.Thread(target=work, name=f"ray-{getattr(fn, '__name__', 'call')}", daemon=True).start()
    return await future


def _reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast on a wrong address (ray.init would retry for minutes)."""
    if address.startswith(("ray://", "auto", "local")):
        return
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except ValueError:
        raise ExecutorError(f"the Ray address {address!r} is not HOST:PORT (the head's GCS address, as "
                            f"`ray start --head` prints it)") from None
    except OSError as exc:
        raise ClusterUnreachable(f"cannot reach the Ray head at {address}: {exc}; is the cluster running "
                            f"(`ray status --address {address}`)?") from None


async def reach_cluster(executor: "RayExecutor", placement: dict | None = None, wait_s: float | None = None) -> None:
    """The engine's driver connected, waiting up to `wait_s` (CLUSTER_WAIT_S) while the cluster is
    unreachable; past that, ClusterUnreachable saying for how long."""
    t0 = time.monotonic()
    limit = CLUSTER_WAIT_S if wait_s is None else wait_s
    while True:
        try:
            return await off_loop(executor._ray, placement)
        except ClusterUnreachable as exc:
            if time.monotonic() - t0 >= limit:
                raise ClusterUnreachable(f"the Ray cluster stayed unreachable for {limit:.0f} s: {exc}") from None
        await asyncio.sleep(CLUSTER_RETRY_S)


def alive_nodes(ray) -> dict[str, dict]:
    return {n["NodeID"]: n for n in ray.nodes() if n.get("Alive")}


def node_totals(nodes: dict[str, dict]) -> dict[str, dict[str, float]]:
    return {nid: {k: float(v) for k, v in n.get("Resources", {}).items() if not k.startswith("node:")}
            for nid, n in nodes.items()}


def wants_containers(placement: dict) -> bool:
    """The plan asked for containers (`image:`, or `cluster: {containers: true}`): the docker
    executor on the run's node (docker_shim.py) instead of the local executor's sandbox."""
    return bool((placement or {}).get("containers"))


def request_of(run_id: str, gpus: int, options: dict) -> Request:
    limits = options.get("limits") or {}
    cluster = options.get("cluster") or {}
    return Request(run_id=run_id, gpus=int(gpus or 0), cpus=float(limits.get("cpus") or cluster.get("cpus") or 1),
                   memory=int(limits.get("memory_bytes") or 0),
                   resources=tuple(sorted((str(k), float(v)) for k, v in (cluster.get("resources") or {}).items())))


class RayHandle(AgentHandle):
    """A run's attempt on the cluster: its actor, known by name to the engine's driver process."""

    def __init__(self, executor: "RayExecutor", run_id: str, name: str, log_dir: Path, where: dict | None = None,
                 placement: dict | None = None):
        self.executor = executor
        self.run_id = run_id
        self.name = name
        self.placement = placement or {}
        self.log_dir = log_dir
        self.stdout_path = log_dir / "stdout.log"
        self.stderr_path = log_dir / "stderr.log"
        self.where = where or _read_json(log_dir / "ray.json") or {}
        self.lost: str | None = None
        self.killed = False          # we had to kill the actor itself (the shim did not answer)
        self.waiting: str | None = None     # the cluster is unreachable: why (`wait` reconnects)
        self._spec: LaunchSpec | None = None

    @property
    def containerized(self) -> bool:
        return (self.log_dir / "control").is_dir()       # the docker executor's control folder (docker_shim.py)

    def ident(self) -> dict:
        # The actor is found again by its name (home + run + attempt); placement is in ray.json. A
        # container's id is recorded so that a restarting engine does not reap it as an orphan.
        cid = (_read_json(self.log_dir / "shim.json") or {}).get("container_id")
        return {"container_id": cid} if cid else {}

    def exit_info(self) -> dict | None:
        info = _read_json(self.log_dir / "exit.json")
        if info is None and self.killed:
            return {"reason": "killed", "exit_code": -int(signal.SIGKILL)}
        if info is None and self.lost:
            return {"reason": "node_lost", "exit_code": -int(signal.SIGKILL), "error": self.lost}
        return info

    def is_alive(self) -> bool:
        return self.lost is None and not self.killed and not (self.log_dir / "exit.json").exists()

    def _call(self, op: str, *args, timeout: float | None = None):
        return self.executor.driver.acall(op, self.executor.address_of(self.placement), self.name, *args,
                                          timeout=timeout)

    async def _check(self, failures: int) -> int:
        """One liveness probe; returns the new count of consecutive failures (sets `lost`).
        ClusterUnreachable when the head is gone (the caller waits for it)."""
        try:
            await self._call("ping", PING_TIMEOUT_S, timeout=PING_TIMEOUT_S + 5)
            return 0
        except DriverError as exc:
            if exc.kind in ("gone", "actor_died"):
                # Usually its node went away; Ray's health checks may declare that a little later
                # (and the dead actor's name may be forgotten before: `gone`). Ray's verdict first.
                deadline = time.monotonic() + NODE_VERDICT_S
                while time.monotonic() < deadline:
                    if await self._node_gone():
                        return failures
                    await asyncio.sleep(1)
                self.lost = ("the run's Ray actor was gone" if exc.kind == "gone"
                             else f"the run's Ray actor died: {str(exc).splitlines()[0][:300]}")
                return failures
            await self.executor.probe_head(self.placement)       # ClusterUnreachable: the head is down
            if not await self._node_gone() and failures + 1 >= UNREACHABLE_LIMIT:
                self.lost = "the run's Ray actor stopped answering"
            return failures + 1

    async def _node_verdict(self) -> None:
        """A container shim saw its actor die (exit.json: node_lost) before Ray declared its node
        dead: wait for that verdict (NODE_VERDICT_S at most; the node may live on) so that the
        retry is not placed on the node that is going away."""
        deadline = time.monotonic() + NODE_VERDICT_S
        while time.monotonic() < deadline:
            try:
                if await self._node_gone():
                    return
            except ClusterUnreachable:
                return
            await asyncio.sleep(1)

    async def _node_gone(self) -> bool:
        node = self.where.get("node_id")
        if not node:
            return False
        try:
            alive = await self.executor.alive_node_ids(self.placement)
        except DriverError:       # no verdict now (ClusterUnreachable: the caller waits for the cluster)
            return False
        if node not in alive:
            self.lost = f"node {self.where.get('hostname', '?')} ({node[:12]}) left the Ray cluster"
            return True
        return False

    async def _wait_for_cluster(self, why: str) -> None:
        """The cluster is unreachable: the run waits (`waiting`, its watch told: the budget clock
        stops) while the engine reconnects (CLUSTER_WAIT_S at most), then the actor is looked up
        again; gone (a head restarted without its state, the node lost) or never back: lost."""
        self.waiting, t0 = why, time.monotonic()
        if self.on_wait is not None:
            await self.on_wait(why, 0.0)
        try:
            await reach_cluster(self.executor, self.placement)
            found = await self._call("actor_exists", timeout=CONNECT_TIMEOUT_S)
        except ClusterUnreachable as exc:
            self.lost = str(exc)
        else:
            if not found and not (self.log_dir / "exit.json").exists():
                self.lost = "the run's Ray actor was gone when the cluster came back (a restarted head, a lost node)"
            elif self._spec is not None:
                self.executor.track(self, self._spec)
        finally:
            self.waiting = None
            if self.on_wait is not None:
                await self.on_wait(None, time.monotonic() - t0)

    async def wait(self) -> int:
        """Until the agent ends. The run keeps its node in admission's books after that, while its
        held-out test is graded (Engine.supervisor_finished forgets it)."""
        if self.waiting is not None and not (self.log_dir / "exit.json").exists():
            await self._wait_for_cluster(self.waiting)
        failures, next_ping = 0, 0.0
        while True:
            info = _read_json(self.log_dir / "exit.json")
            if info is not None:
                if info.get("reason") == "node_lost":
                    await self._node_verdict()
                return int(info.get("exit_code", -1))
            if self.lost or self.killed:
                if self.lost:       # its group goes now: Ray would place a lost node's group again elsewhere
                    self.executor.driver.call("remove_group", self.executor.address_of(self.placement), self.name)
                return -int(signal.SIGKILL)
            if time.monotonic() >= next_ping:
                next_ping = time.monotonic() + PING_EVERY_S
                try:
                    failures = await self._check(failures)
                except ClusterUnreachable as exc:
                    if not (self.log_dir / "exit.json").exists():
                        await self._wait_for_cluster(str(exc))
                    failures = 0
                if self.lost and (self.log_dir / "exit.json").exists():
                    self.lost = None      # it ended just before its actor exited
            await asyncio.sleep(0.2)

    def _signal(self, sig: int) -> None:
        if self.is_alive() and self.waiting is None:
            self.executor.driver.call("signal", self.executor.address_of(self.placement), self.name, int(sig))

    async def kill(self, reason: str) -> None:
        (self.log_dir / "kill_reason").write_text(reason)
        self._signal(signal.SIGTERM)
        grace = time.monotonic() + (KILL_GRACE_CONTAINER_S if self.containerized else KILL_GRACE_S)
        while time.monotonic() < grace:
            if not self.is_alive():
                return
            await asyncio.sleep(0.05)
        try:      # the shim did not answer: the actor (and with it the shim) goes
            await self._call("kill", timeout=60)
        except ClusterUnreachable:
            pass          # its head is gone: so is the actor, with the shim (PR_SET_PDEATHSIG)
        except DriverError as exc:
            if exc.kind != "gone":
                raise
        self.killed = True

    async def pause(self) -> None:
        self._signal(signal.SIGUSR1)

    async def resume(self) -> None:
        self._signal(signal.SIGUSR2)

    async def extend_deadline(self, deadline: float) -> None:
        tmp = self.log_dir / "deadline.tmp"       # the shim re-reads it: the home is shared
        tmp.write_text(repr(deadline))
        os.replace(tmp, self.log_dir / "deadline")


class RayExecutor(Executor):
    name = "ray"
    PLACEMENT_TIMEOUT_S = 300.0
    plan_keys = frozenset({"cluster"})
    in_plan_form = False          # the form has no `cluster:` fields
    uses_host_slots = False       # the cluster's nodes hold its runs (admit_runs)
    takes_images = True           # `image:`: containers on the nodes
    grades_remotely = True        # on the run's node (grading_host/ray_grading.py)
    # Loaded by name, as plugins are (registry.py): the engine's grading client sits above the
    # executors (it uses their sandbox), so no executor module imports it.
    GRADING_MODULE = "autorl_tui.grading_host.ray_grading"

    def __init__(self, home: Path | str | None = None, address: str | None = None):
        self.home = Path(home) if home is not None else None
        self.address = address
        self._placed: dict[str, tuple[str, Request]] = {}     # run id -> (node id, request), our live actors
        self._seen_home: set[str] = set()                      # node ids that showed they see the home
        self._docker_ready: set[tuple[str, str | None]] = set()   # (node id, image) that can start containers
        self._nvml_ready: set[str] = set()                     # GPU node ids whose processes read NVML
        self._same_code: set[str] = set()                      # node ids that run the engine's code
        self._packed: dict[str, str] = {}      # run id -> the node admission packed it on (asked of Ray, softly)
        # The engine's Ray driver is a child process: Ray ends a driver whose head stays away.
        self.driver = DriverProcess(self.home / DRIVER_LOG if self.home is not None else None)
        self.view = ClusterView(self._nodes)

    # -------------------------------------------------------------- cluster facts
    def address_of(self, placement: dict | None = None) -> str | None:
        return cluster_address(placement) or self.address

    def _ray(self, placement: dict | None = None) -> None:
        """The driver process connected to the cluster (blocking: call it off the event loop).
        The head's port is probed here first: a head that refuses connections ends the driver
        (Ray would end it after a minute), and ClusterUnreachable says so."""
        address = self.address_of(placement)
        if not address:
            raise ExecutorError("executor ray needs a cluster: set RAY_ADDRESS=HOST:PORT (the head's GCS address, "
                                "as `ray start --head` prints it) or `cluster: {address: HOST:PORT}` in the plan")
        self._probe(address)
        try:
            self.driver.call_sync("connect", address, timeout=CONNECT_TIMEOUT_S + 10)
        except DriverError as exc:       # a connect that hangs (the child says so itself after CONNECT_TIMEOUT_S)
            raise ClusterUnreachable(f"cannot connect to the Ray cluster at {address}: {exc}") from None

    def _probe(self, address: str) -> None:
        try:
            _reachable(address, timeout_s=3.0)
        except ClusterUnreachable as exc:
            self.driver.reset(f"the Ray head at {address} refused connections")
            raise exc from None

    async def probe_head(self, placement: dict | None = None) -> None:
        """ClusterUnreachable when the head's port refuses connections (its driver is ended)."""
        address = self.address_of(placement)
        if address:
            await off_loop(self._probe, address)

    def _nodes(self) -> list[dict]:
        """`ray.nodes()` through the driver (blocking: the background view calls it)."""
        self._ray()
        return self.driver.call_sync("nodes", self.address, timeout=60)

    async def alive_node_ids(self, placement: dict | None = None) -> list[str]:
        return await self.driver.acall("alive_nodes", self.address_of(placement), timeout=60)

    def available(self) -> tuple[bool, str]:
        try:
            import ray  # noqa: F401
        except ImportError:
            return False, f"the ray package is not installed ({INSTALL})"
        if not (self.address or os.environ.get("RAY_ADDRESS")):
            return False, "no cluster named: set RAY_ADDRESS or `cluster: {address: ...}` in the plan"
        return True, "ok"

    @property
    def api_host(self) -> str:
        """Where the per-run grading API listens: an address the nodes reach (AUTORL_API_HOST overrides)."""
        configured = settings.current().api_host
        if configured:
            return configured
        try:
            from ray.util import get_node_ip_address

            return get_node_ip_address()
        except Exception:
            return "127.0.0.1"

    def marker(self) -> Path:
        """A file in the home that every node must see (written once, read by each node's check)."""
        path = self.home / ".cluster-marker"
        if not path.exists():
            path.write_text(f"autorl-tui home {self.home.resolve()}\n")
        return path

    def _on_each_node(self, node_ids: list[str], fn, *args, what: str) -> list[dict]:
        """`fn(*args)` as a tiny task pinned to each node (in the driver); their answers
        (UsageError when Ray fails)."""
        return self.driver.call_sync("on_each_node", self.address, f"{fn.__module__}:{fn.__qualname__}", node_ids,
                                     list(args), what, timeout=180)

    def check_home(self, nodes: dict[str, dict]) -> None:
        """Each alive node not checked yet runs a tiny pinned task that looks for the marker."""
        from autorl_tui.executors.ray_node import can_see

        todo = [nid for nid in nodes if nid not in self._seen_home]
        if not todo:
            return
        marker = str(self.marker())
        results = self._on_each_node(todo, can_see, marker, what=f"that the Ray nodes see the home {self.home}")
        blind = [r for r in results if not r["ok"]]
        if blind:
            names = ", ".join(f"{r['hostname']} ({r['node_id'][:12]})" for r in blind)
            raise UsageError(f"the home {self.home} is not visible on Ray node(s) {names}: {marker} is missing "
                             f"there. Put the home on a filesystem every node mounts at the same path "
                             f"(NFS, Lustre; docs/cluster.md) and pass it with --home")
        self._seen_home.update(r["node_id"] for r in results)

    async def validate(self, run_id: str, gpus: int, options: dict) -> None:
        """`check_request` off the caller's event loop (connecting may take minutes)."""
        await off_loop(self.check_request, run_id, gpus, options)

    def check_request(self, run_id: str, gpus: int, options: dict) -> None:
        """Plan validation: the cluster is reachable, sees the home, and some node can hold the run.
        Blocking: call it through `validate`."""
        from autorl_tui.executors.ray_auth import check_cluster_auth

        try:
            address = cluster_address(options.get("cluster")) or self.address
            if address:
                _reachable(address)
                check_cluster_auth(address, (options.get("cluster") or {}).get("auth", "token"))
            self.address = self.address or cluster_address(options.get("cluster"))    # for admission's view
            self._ray(options.get("cluster"))
            nodes = {n["NodeID"]: n for n in self._nodes() if n.get("Alive")}
        except ExecutorError as exc:
            raise UsageError(str(exc)) from None
        req = request_of(run_id, gpus, options)
        if not feasible(req, node_totals(nodes)):
            have = "; ".join(f"{n.get('NodeManagerHostname', '?')}: "
                             + ", ".join(f"{k}={v:g}" for k, v in sorted(t.items()) if k in ("GPU", "CPU") or k in dict(req.resources))
                             for n, t in zip(nodes.values(), node_totals(nodes).values()))
            raise UsageError(f"no node of the Ray cluster can hold a run asking {req.needs()} (nodes: {have or 'none'}); "
                             f"lower gpus_per_run / limits, or add a node that has them")
        self.check_home(nodes)
        self.check_software(nodes)
        self.check_nvml(nodes)
        if wants_containers(options.get("cluster")) or options.get("image"):
            self.check_docker(nodes, options.get("image"))

    def check_software(self, nodes: dict[str, dict]) -> None:
        """Every alive node runs the engine's code (ray_runtime: its identity, shipped with the
        job's runtime_env, against the node's own), checked once per node."""
        from autorl_tui.executors.ray_runtime import node_software, software_verdict

        todo = [nid for nid in nodes if nid not in self._same_code]
        if not todo:
            return
        refusal = software_verdict(self._on_each_node(todo, node_software, what="the software of the Ray nodes"))
        if refusal:
            raise UsageError(refusal)
        self._same_code.update(todo)

    def check_nvml(self, nodes: dict[str, dict]) -> None:
        """Every alive node with GPUs must read them through NVML (ray_node.nvml_ready), checked once per node."""
        from autorl_tui.executors.ray_node import nvml_ready, nvml_verdict

        totals = node_totals(nodes)
        todo = [nid for nid in nodes if totals[nid].get("GPU", 0) > 0 and nid not in self._nvml_ready]
        if not todo:
            return
        results = self._on_each_node(todo, nvml_ready, what="NVML on the Ray nodes with GPUs")
        refusal = nvml_verdict(results)
        if refusal:
            raise UsageError(refusal)
        self._nvml_ready.update(r["node_id"] for r in results)

    def check_docker(self, nodes: dict[str, dict], image: str | None) -> None:
        """A plan asking for containers: every alive node runs a tiny pinned task that checks its
        Docker Engine (and the plan's image). Which node Ray picks is not known yet, so all must."""
        from autorl_tui.executors.ray_node import docker_ready

        todo = [nid for nid in nodes if (nid, image) not in self._docker_ready]
        if not todo:
            return
        results = self._on_each_node(todo, docker_ready, image, what="the Docker Engines of the Ray nodes")
        unready = [r for r in results if not r["ok"]]
        if unready:
            names = "; ".join(f"{r['hostname']} ({r['node_id'][:12]}): {r['why']}" for r in unready)
            raise UsageError(f"the plan asks for containers on the Ray nodes, but not every node can start them: "
                             f"{names}. Start Docker there and `docker load` the image on every node, or drop "
                             f"`image:`/`cluster.containers` to run in the bubblewrap sandbox (docs/cluster.md)")
        self._docker_ready.update((r["node_id"], image) for r in results)

    # -------------------------------------------------------------- the Executor interface
    @classmethod
    def check_plan(cls, raw: dict, options: dict, where: str) -> None:
        from autorl_tui.executors.ray_plan import check_plan

        check_plan(raw, options, where)

    @classmethod
    def runs_in_container(cls, options: dict) -> bool:
        return wants_containers(options.get("cluster"))

    @classmethod
    def cluster_configured(cls) -> bool:
        return bool(os.environ.get("RAY_ADDRESS"))

    def admit_runs(self, queued: list[tuple[str, int, dict]], active: list[tuple[str, int, dict]]) -> list[str]:
        for _, _, options in queued:      # runs queued by an earlier engine name their cluster too
            self.address = self.address or cluster_address(options.get("cluster"))
        return self.admit([request_of(*q) for q in queued], [request_of(*a) for a in active])

    def cluster_state(self, reader) -> dict | None:
        from autorl_tui.executors.ray_view import holdings

        held = holdings(reader.live_attempts(self.name))
        return cluster_state(self.address or cluster_address(), self.view.current(), self.view.error, held)

    def _grading(self):
        import importlib

        return importlib.import_module(self.GRADING_MODULE)

    async def grade_remotely(self, request: dict, work_dir: Path, **kw):
        return await self._grading().grade_on_cluster(self, request, work_dir, **kw)

    async def close(self) -> None:
        await off_loop(self.driver.close)

    # -------------------------------------------------------------- scheduling
    def admit(self, queued: list[Request], active: list[Request]) -> list[str]:
        """Which queued runs to start now (strict order), given our active runs (engine.py). Reads
        the background view of the nodes: never waits on Ray (none start until it is known)."""
        nodes = self.view.alive()
        if nodes is None:
            if self.view.error:
                raise ExecutorError(self.view.error)
            return []
        placed = [self._placed[r.run_id] for r in active if r.run_id in self._placed]
        pending = [r for r in active if r.run_id not in self._placed]
        return admit(queued, node_totals(nodes), placed, pending, chosen=self._packed)

    def packed_node(self, run_id: str | None) -> str | None:
        """The node admission packed this started, not yet placed run on (None when unknown)."""
        return self._packed.get(run_id) if run_id else None

    def forget(self, run_id: str, ended: bool = True) -> None:
        """What the run held is free for admission; when it has ended, its placement groups go (the
        call is not awaited: a cluster away now took them with it, or a later start of the run
        removes them). An engine that stops leaves them to the agent it leaves running."""
        self._placed.pop(run_id, None)
        if ended and self.home is not None and self.driver.running:
            self.driver.call("release_groups", self.address, run_prefix(self.home, run_id))

    # -------------------------------------------------------------- start / adopt
    async def start(self, spec: LaunchSpec) -> AgentHandle:
        placement = spec.cluster.placement
        await off_loop(self._ray, placement)
        req = request_of(spec.run_id, int(placement.get("gpus") or 0),
                         {"limits": {"cpus": spec.cpus, "memory_bytes": spec.memory_bytes}, "cluster": placement})
        name = actor_name(self.home, spec.run_id, spec.attempt)
        spec.log_dir.mkdir(parents=True, exist_ok=True)
        for stale in ("exit.json", "shim.json", "kill_reason", "ray.json", "docker-logs.json"):
            (spec.log_dir / stale).unlink(missing_ok=True)
        needs = req.needs()
        custom = {k: v for k, v in needs.items() if k not in ("GPU", "CPU", "memory")}
        # The attempt's placement group (ray_groups) holds the run's request for its agent and its
        # gradings, asked on the node admission packed it on (softly: elsewhere if Ray sees that
        # node full): Ray's default policy spreads runs, which can leave no node with room for a
        # larger run that admission, packing, counted on.
        options = {"num_gpus": needs.get("GPU", 0), "num_cpus": needs.get("CPU", 0),
                   "memory": needs.get("memory") or None, "resources": custom or None,
                   "node": self._packed.pop(spec.run_id, None), "bundles": bundles(needs),
                   "prefix": run_prefix(self.home, spec.run_id)}
        self._placed.pop(spec.run_id, None)
        launch = container_launch(spec, self.home) if wants_containers(placement) else launch_of(spec)
        try:
            where = await self.driver.acall("start_actor", self.address_of(placement), name, options, launch,
                                            str(self.marker()), self.PLACEMENT_TIMEOUT_S,
                                            timeout=self.PLACEMENT_TIMEOUT_S + 60)
        except DriverError as exc:
            if exc.kind == "timeout":
                raise ExecutorError(f"Ray did not place the run within {self.PLACEMENT_TIMEOUT_S:.0f} s "
                                    f"(asking {needs})") from None
            raise ExecutorError(f"the run's Ray actor could not start the agent: {exc}") from None
        where["actor"] = name
        (spec.log_dir / "ray.json").write_text(json.dumps(where))
        self._placed[spec.run_id] = (where["node_id"], req)
        handle = RayHandle(self, spec.run_id, name, spec.log_dir, where, placement)
        handle._spec = spec
        await wait_for_shim(spec.log_dir, handle.is_alive, handle.kill,
                            exited=lambda: "the shim on the Ray node ended before starting the agent")
        return handle

    async def adopt(self, attempt: dict, spec: LaunchSpec) -> AgentHandle | None:
        """The attempt's actor, found by its name. With the cluster unreachable the handle waits for
        it (`waiting` says why; its `wait` reconnects) instead of the run failing."""
        name = actor_name(self.home, spec.run_id, int(attempt["number"]))
        placement = spec.cluster.placement
        handle = RayHandle(self, spec.run_id, name, Path(attempt["log_dir"]), placement=placement)
        handle._spec = spec
        # Its gradings (a finalizing run's held-out test) connect to the same cluster.
        self.address = self.address or cluster_address(placement)
        try:
            await off_loop(self._ray, placement)
            found = await self.driver.acall("actor_exists", self.address_of(placement), name,
                                            timeout=CONNECT_TIMEOUT_S)
        except ClusterUnreachable as exc:
            handle.waiting = str(exc)
            return handle
        if not found and not handle.log_dir.joinpath("exit.json").exists():
            handle.lost = "the run's Ray actor was gone after an engine restart (its node left the cluster?)"
        self.track(handle, spec)
        return handle

    def track(self, handle: RayHandle, spec: LaunchSpec) -> None:
        """An adopted run that still runs holds its node in admission's books."""
        if handle.is_alive() and handle.where.get("node_id"):
            self._placed[spec.run_id] = (handle.where["node_id"],
                                         request_of(spec.run_id, int(spec.cluster.placement.get("gpus") or 0),
                                                    {"limits": {"cpus": spec.cpus, "memory_bytes": spec.memory_bytes},
                                                     "cluster": spec.cluster.placement}))


def cluster_report(address: str | None, held: list[dict] | None = None) -> dict:
    """What `cluster status` and `doctor` show (`ray_view.cluster_state`), connecting here and now."""
    try:
        nodes, error = connect(address).nodes(), None
    except ExecutorError as exc:
        nodes, error = None, str(exc)
    return cluster_state(address, nodes, error, held or [])

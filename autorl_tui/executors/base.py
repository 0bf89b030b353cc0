"""The executor interface."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import abc
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Mount:
    source: Path
    target: str           # path inside the container; for the local executor, the workspace-relative place
    read_only: bool = True


@dataclass
class SandboxLaunch:
    """The local executor's own part (a cluster node's sandboxed launch reads it too)."""
    private_paths: list[Path] = field(default_factory=list)   # must stay unreadable to the agent
    isolate: bool = True                 # False only for a plan with `isolation: none`
    host_ports: list[int] = field(default_factory=list)   # host loopback ports the sandbox may reach


@dataclass
class ContainerLaunch:
    """A container executor's own part (docker; a cluster node's container launch)."""
    image: str | None = None             # None: the harness's own image with the agent runtime mounted
    grading_socket: Path | None = None   # for containers without a network: the grading API's Unix socket


@dataclass
class ClusterLaunch:
    """A cluster executor's own part: what to ask the cluster for ({"gpus": N, "resources": {...},
    "address": ...}); the device ids come from the cluster's assignment, so `LaunchSpec.gpus` stays empty."""
    placement: dict = field(default_factory=dict)


@dataclass
class LaunchSpec:
    """What every executor gets (the common part), and each kind of executor's own part."""
    run_id: str
    attempt: int
    command: str | list[str]          # a shell string or an argv list, run in the workspace
    workspace: Path
    env: dict[str, str]               # the complete environment: nothing else leaks in
    log_dir: Path                     # harness-owned: stdout.log, stderr.log, exit.json are written here
    deadline: float                   # epoch seconds; the executor kills the whole tree at this time
    gpus: list[str] = field(default_factory=list)      # device ids, never a count
    mounts: list[Mount] = field(default_factory=list)  # read-only model and train data (containers)
    network: str = "none"             # none | bridge | host (both executors: docs/security.md)
    cpus: float | None = None
    memory_bytes: int | None = None
    labels: dict[str, str] = field(default_factory=dict)
    writable: tuple[str, ...] = ()       # workspace folders the agent may write (given to its uid)
    log_file_bytes: int | None = None    # cap of stdout.log/stderr.log on disk (executors/capped_log.py)
    sandbox: SandboxLaunch = field(default_factory=SandboxLaunch)
    container: ContainerLaunch = field(default_factory=ContainerLaunch)
    cluster: ClusterLaunch = field(default_factory=ClusterLaunch)

    @property
    def stdout_path(self) -> Path:
        return self.log_dir / "stdout.log"

    @property
    def stderr_path(self) -> Path:
        return self.log_dir / "stderr.log"

    @property
    def exit_path(self) -> Path:
        return self.log_dir / "exit.json"

    def to_dict(self) -> dict:
        """JSON-ready (paths as strings): how a cluster executor hands the spec to its node."""
        d = asdict(self)
        for key in ("workspace", "log_dir"):
            d[key] = str(d[key])
        socket = d["container"]["grading_socket"]
        d["container"]["grading_socket"] = None if socket is None else str(socket)
        d["sandbox"]["private_paths"] = [str(p) for p in d["sandbox"]["private_paths"]]
        d["mounts"] = [dict(m, source=str(m["source"])) for m in d["mounts"]]
        d["writable"] = list(d["writable"])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "LaunchSpec":
        sandbox, container = dict(d.get("sandbox") or {}), dict(d.get("container") or {})
        sandbox["private_paths"] = [Path(p) for p in sandbox.get("private_paths", [])]
        socket = container.get("grading_socket")
        container["grading_socket"] = None if socket is None else Path(socket)
        d = dict(d, workspace=Path(d["workspace"]), log_dir=Path(d["log_dir"]), writable=tuple(d.get("writable", ())),
                 mounts=[Mount(Path(m["source"]), m["target"], m.get("read_only", True)) for m in d.get("mounts", [])],
                 sandbox=SandboxLaunch(**sandbox), container=ContainerLaunch(**container),
                 cluster=ClusterLaunch(**(d.get("cluster") or {})))
        return cls(**d)


class AgentHandle(abc.ABC):
    """A started (or re-adopted) agent. Its stdout/stderr go to `stdout_path`/`stderr_path`,
    which the engine tails by byte offset so that a restarted engine can resume where it was."""

    stdout_path: Path
    stderr_path: Path
    # Executors whose agents can be cut off from the engine for a while (executor ray: its cluster
    # unreachable) await on_wait(why, 0.0) when the wait begins and on_wait(None, waited_s) when it
    # ends; the run's watch sets it (agent_watch.py: the budget clock stops meanwhile).
    on_wait: Callable[[str | None, float], Awaitable[None]] | None = None
    waiting: str | None = None        # while such a wait lasts: why

    @abc.abstractmethod
    def ident(self) -> dict:
        """What to record on the attempt row to find it again: {"pid": ...} or {"container_id": ...}."""

    @abc.abstractmethod
    async def wait(self) -> int:
        """Wait for the agent to end; returns its exit code (negative: killed by that signal)."""

    @abc.abstractmethod
    async def kill(self, reason: str) -> None:
        """Kill the agent's whole process tree (or container) now."""

    @abc.abstractmethod
    def is_alive(self) -> bool: ...

    def pids(self) -> list[int]:
        """Host pids of the agent's processes, for resource sampling (may be empty)."""
        return []

    async def pause(self) -> None:
        raise NotImplementedError("this executor cannot pause")

    async def resume(self) -> None:
        raise NotImplementedError("this executor cannot resume")

    async def extend_deadline(self, deadline: float) -> None:
        raise NotImplementedError("this executor cannot extend a deadline")


class Executor(abc.ABC):
    """Where and how an agent runs. Everything the engine, the plan parser and the console need to
    know about an executor is asked of it here, never decided from its name: a new back end
    (Kubernetes, Slurm) is its own module plus one line in `registry.py` (docs/ARCHITECTURE.md).

    The class attributes and classmethods are known before an executor is built (plan parsing,
    the New-plan form); the instance methods need a built one (`Engine.executor(name)`)."""

    name: str
    # Plan keys only this executor takes (executor ray: `cluster`); another executor's plan refuses them.
    plan_keys: frozenset[str] = frozenset()
    # Offered by the console's New-plan form (its fields cover everything this executor needs).
    in_plan_form: bool = True
    # Its runs hold this engine's slots and devices; False: a cluster places them (`admit_runs`).
    uses_host_slots: bool = True
    # It may run an agent in a named image (`image:`); False: always on the agent runtime.
    takes_images: bool = False
    # The agent runs on this host as the harness user when unisolated (`isolation: none`), so its
    # workspace gets copies, not hard links, and its stack's own executables stay on its PATH.
    on_this_host: bool = False
    # The per-run grading API is reached through a Unix socket (containers without a network).
    grading_over_socket: bool = False
    # Its gradings run where its agents run (`remote_grading`), taking none of this host's slots.
    grades_remotely: bool = False
    # Its agents can outlive a crashed engine as things no live run owns (containers): `reap_leftovers`.
    leaves_leftovers: bool = False
    # Where the per-run grading API listens: an address its agents reach.
    api_host: str = "127.0.0.1"

    @classmethod
    def for_engine(cls, home: Path) -> "Executor":
        """The executor an engine on this home uses (containers and clusters label their runs by it)."""
        return cls(home=home)

    @classmethod
    def check_plan(cls, raw: dict, options: dict, where: str) -> None:
        """Refuse this executor's plan keys when they are wrong (UsageError, one line naming the fix);
        may add to the runs' `options` what those keys imply."""

    @classmethod
    def isolation_label(cls, isolation: str) -> str:
        """How its agents are isolated, as recorded in the run's spec and every report: `bwrap`
        (the bubblewrap sandbox) or `none` (the plan said `isolation: none`)."""
        return "none" if isolation == "none" else "bwrap"

    @classmethod
    def runs_in_container(cls, options: dict) -> bool:
        """Whether a run with these plan options runs its agent in a container."""
        return False

    def check_host(self, isolation: str, devices: Sequence[str] = ()) -> str | None:
        """Why this host cannot run the plan's agents now (a one-line fix), or None. `devices`: the
        engine's GPU ids a run of the plan may get (empty for a CPU-only run)."""
        return None

    async def validate(self, label: str, gpus: int, options: dict) -> None:
        """Plan validation that needs the executor's back end (a cluster); UsageError when it cannot hold the run."""

    def admit_runs(self, queued: list[tuple[str, int, dict]], active: list[tuple[str, int, dict]]) -> list[str]:
        """Executors that place their own runs (`uses_host_slots` False): which queued runs
        (run id, GPUs, plan options) start now, given the active ones. Never blocks."""
        raise NotImplementedError(f"executor {self.name} uses this host's slots")

    def forget(self, run_id: str, ended: bool = True) -> None:
        """The run's supervisor is over: what it held is free for admission. `ended`: the run has
        ended (a final state), rather than the engine stopping with its agent left running."""

    def cluster_state(self, reader) -> dict | None:
        """The cluster as the console shows it (nodes, GPUs, holdings read from `reader`, a StoreReader)."""
        return None

    @classmethod
    def cluster_configured(cls) -> bool:
        """The environment names a cluster of this executor's (the console shows it before any run)."""
        return False

    async def grade_remotely(self, request: dict, work_dir: Path, **kw):
        """`grades_remotely`: grade where the run's agent ran; a GradingOutcome (grading_host/grading_client.py)."""
        raise NotImplementedError(f"executor {self.name} grades on this host")

    async def close(self) -> None:
        """The engine stops: end what the executor keeps running for it (remote graders)."""

    def reap_leftovers(self, live: set[str]) -> list[str]:
        """Leftovers of a crashed engine (containers no live run owns, by id) removed; their ids."""
        return []

    @abc.abstractmethod
    async def start(self, spec: LaunchSpec) -> AgentHandle:
        """Start the agent. Raises ExecutorError (an infrastructure failure) if it cannot."""

    @abc.abstractmethod
    async def adopt(self, attempt: dict, spec: LaunchSpec) -> AgentHandle | None:
        """Find an agent started by an earlier engine (from the attempt row); None if it is gone."""

    def available(self) -> tuple[bool, str]:
        return True, "ok"


class ExecutorError(Exception):
    """The executor could not start or control the agent (an infrastructure failure)."""


class AgentStartError(ExecutorError):
    """The agent's own command could not be started (not found, not executable): the agent's
    fault, never retried."""

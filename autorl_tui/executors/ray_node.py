"""The part of the Ray executor that runs inside a run's actor, on the node Ray placed it on.

It does what the local executor does on the engine's host (`local.py`): writes `launch.json` into
the run's log folder (on the shared home) and starts the supervising shim, which sandboxes the
agent and enforces its deadline; or, when the plan asks for containers, the docker executor's
shim (`docker_shim.py`), which runs the agent in a container of the node's Docker Engine. Two
differences: the GPUs are Ray's assignment to this actor (CUDA_VISIBLE_DEVICES, or the container's
device ids), and the shim dies with the actor (PR_SET_PDEATHSIG; the container shim first kills
its container), so a node that is
removed or an actor that is killed takes its agent along instead of leaving an orphan that keeps
writing into the home. When the shim ends, the actor process exits and Ray frees its resources,
even while no engine is running."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from autorl_tui import settings
from autorl_tui.executors.docker_shim import parent_death_signal


def _die_with_parent() -> None:      # in the forked child, before exec (nothing is imported there)
    parent_death_signal(signal.SIGKILL)


def _stop_with_parent() -> None:     # the container shim: SIGTERM, so that it kills its container first
    parent_death_signal(signal.SIGTERM)


class RunNode:
    """A run's actor (wrapped by `ray.remote` in `ray.py`). Methods are quick; nothing blocks on the agent."""

    def __init__(self) -> None:
        self.shim_pid: int | None = None

    def where(self) -> dict:
        import ray

        ctx = ray.get_runtime_context()
        return {"node_id": ctx.get_node_id(), "hostname": socket.gethostname(),
                "gpu_ids": [str(g) for g in ray.get_gpu_ids()], "actor_pid": os.getpid(),
                "placed_at": time.time()}      # the actor holds its resources from here on

    def start(self, launch: dict, home_marker: str) -> dict:
        """Start the shim for `launch` (local.launch_of's dict, or docker_shim.container_launch's
        when the plan asks for containers); returns where it runs."""
        from autorl_tui.executors import docker_shim
        from autorl_tui.executors.local import SHIM_MODULE, spawn_shim, write_launch

        from autorl_tui.executors.ray_runtime import CODE_VAR, code_identity, mismatch

        where = self.where()
        odd = mismatch(os.environ.get(CODE_VAR), code_identity())
        if odd:
            raise RuntimeError(f"node {where['hostname']} ({where['node_id'][:12]}) does not run the engine's "
                               f"autorl-tui: {odd}; install the same autorl-tui on every node (docs/cluster.md)")
        marker = Path(home_marker)
        if not marker.is_file():
            raise RuntimeError(f"node {where['hostname']} ({where['node_id'][:12]}) cannot see the home: "
                               f"{marker} is missing there; the home must be on a filesystem every node mounts "
                               f"at the same path (docs/cluster.md)")
        if "container" in launch:
            launch, module, on_death = dict(launch, gpu_ids=where["gpu_ids"]), docker_shim.MODULE, _stop_with_parent
        else:
            launch = dict(launch, env=dict(launch["env"], CUDA_VISIBLE_DEVICES=",".join(where["gpu_ids"])))
            if launch.get("sandbox") is not None:
                launch["sandbox"] = dict(launch["sandbox"], gpus=[str(g) for g in where["gpu_ids"]])
            module, on_death = SHIM_MODULE, _die_with_parent
        launch_path = write_launch(Path(launch["log_dir"]), launch)
        started = threading.Event()
        failure: list[BaseException] = []

        def keeper() -> None:
            # PDEATHSIG fires when the *thread* that forked exits: this one lives until the shim ends.
            try:
                popen = spawn_shim(sys.executable, launch_path, preexec_fn=on_death, module=module)
            except OSError as exc:
                failure.append(exc)
                started.set()
                return
            self.shim_pid = popen.pid
            started.set()
            popen.wait()
            os._exit(0)      # the agent is over: free the actor's resources now

        threading.Thread(target=keeper, name="shim-keeper", daemon=False).start()
        started.wait(30)
        if failure:
            raise RuntimeError(f"could not start the shim on {where['hostname']}: {failure[0]}")
        return dict(where, shim_pid=self.shim_pid)

    def signal(self, sig: int) -> bool:
        if self.shim_pid is None:
            return False
        try:
            os.kill(self.shim_pid, sig)
            return True
        except ProcessLookupError:
            return False

    def ping(self) -> dict:
        return {"shim_pid": self.shim_pid}


def can_see(marker: str) -> dict:
    """A task pinned to one node: does it see the home's marker file?"""
    import ray

    return {"node_id": ray.get_runtime_context().get_node_id(), "hostname": socket.gethostname(),
            "ok": Path(marker).is_file()}


def nvml_probe() -> tuple[bool, str]:
    """Whether a node with NVIDIA GPUs can read them through NVML (nvidia-ml-py): without it, its
    gradings would not know its GPUs and would run on the CPU. A node with no NVIDIA device node
    (/dev/nvidiaN, or under $AUTORL_DEVICE_ROOT) declares stand-in GPUs (a test cluster): not refused."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
        return True, ""
    except ImportError:
        why = "nvidia-ml-py is not installed"
    except Exception as exc:       # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        why = f"NVML unavailable: {exc}"
    root = settings.current().device_root or Path("/dev")
    if not any(p.name[len("nvidia"):].isdigit() for p in root.glob("nvidia*")):
        return True, f"no NVIDIA device here ({why}): its GPUs are declared stand-ins"
    return False, why


def nvml_ready() -> dict:
    """A task pinned to a node that has GPUs: can it read them through NVML?"""
    import ray

    ok, why = nvml_probe()
    return {"node_id": ray.get_runtime_context().get_node_id(), "hostname": socket.gethostname(), "ok": ok,
            "why": why}


def nvml_verdict(results: list[dict]) -> str | None:
    """The refusal for GPU nodes whose processes cannot read NVML (one line, with the fix), or None."""
    from autorl_tui.executors.ray_runtime import refused_nodes

    names = refused_nodes(results)
    if not names:
        return None
    return (f"Ray node(s) with GPUs cannot read them through NVML: {names}. Their gradings would run on the "
            f"CPU without a word; install nvidia-ml-py there (pip install 'autorl-tui[ray]' brings it) and check "
            f"the NVIDIA driver (nvidia-smi)")


def docker_ready(image: str | None) -> dict:
    """A task pinned to one node: can a run's container start here (its Docker Engine answers,
    and the plan's image, when it names one, is present: nothing is pulled)?"""
    import ray

    from autorl_tui.executors.docker import DockerExecutor

    out = {"node_id": ray.get_runtime_context().get_node_id(), "hostname": socket.gethostname(), "ok": True,
           "why": ""}
    executor = DockerExecutor()
    ok, why = executor.available()
    if ok and image:
        try:
            executor.client.images.get(image)
        except Exception as exc:       # ImageNotFound, or the engine went away
            ok, why = False, f"image {image!r} is not in its Docker Engine ({type(exc).__name__})"
    return dict(out, ok=ok, why="" if ok else why)

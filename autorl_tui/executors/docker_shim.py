"""One agent container run to its end by a process: the docker executor on a Ray node.

    python -m autorl_tui.executors.docker_shim LOG_DIR/launch.json

A run actor (`ray_node.py`) of a plan that asks for containers starts this instead of the local
shim, with the same contract: `shim.json` once the agent runs (here with its container id),
`exit.json` when it ended (after its logs are copied), or `exit.json` with reason
`container_failed` when the container could not start. What it reuses of the docker executor
(`docker.py`): the container's configuration and creation, the log pumps into the shared home
(resumable, `docker_logs.py`), the exit record, the removal. What it adds:
- the GPUs Ray assigned to the actor, pinned as the container's device ids;
- the grading API: a Unix socket in a node-local folder, bound into the container as the docker
  executor's is, forwarding each connection to the engine's TCP API (`GRADING_SERVER_URL`), unless
  the network is `host` (the container dials the engine itself);
- signals from the actor: SIGTERM kills the container, SIGUSR1/SIGUSR2 pause/resume it; the
  deadline the engine extends (`LOG_DIR/deadline`) is copied to the container's control file;
- the actor's death: the kernel sends SIGTERM (PR_SET_PDEATHSIG) and, no kill having been asked,
  the container is killed and `exit.json` says `node_lost`, so the engine retries the run, as when
  a local shim dies with its actor. The shim proper is a grandchild of the actor (`main`): Ray
  SIGKILLs a worker's direct children when the worker sees its node's raylet die.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from autorl_tui.executors.base import ExecutorError, LaunchSpec

MODULE = "autorl_tui.executors.docker_shim"
PR_SET_PDEATHSIG = 1
DEADLINE_POLL_S = 1.0


def container_launch(spec: LaunchSpec, home: Path) -> dict:
    """What the run actor hands this shim (its `launch.json`)."""
    return {"container": spec.to_dict(), "home": str(Path(home).resolve()), "log_dir": str(spec.log_dir),
            "deadline": spec.deadline}


def node_spec(launch: dict, gpu_ids: list[str], socket_path: Path | None) -> LaunchSpec:
    """The spec as the docker executor runs it on this node: Ray's GPUs, the node's API socket."""
    spec = LaunchSpec.from_dict(launch["container"])
    spec.gpus = [str(g) for g in gpu_ids]
    spec.container.grading_socket = socket_path
    spec.cluster.placement = {}
    return spec


def _api_forwarder(grading_url: str) -> tuple[Path, socket.socket]:
    """A Unix socket (in a node-local folder the container user may traverse) whose connections
    go to the engine's grading API."""
    from autorl_tui.isolation.sandbox_net import upstream_to_tcp

    parts = urlsplit(grading_url)
    if not parts.hostname or not parts.port:
        raise ExecutorError(f"the run's grading URL {grading_url!r} names no HOST:PORT")
    folder = Path(tempfile.mkdtemp(prefix="autorl-api-"))
    os.chmod(folder, 0o711)
    path = folder / "grading.sock"
    server = upstream_to_tcp(path, parts.hostname, parts.port,   # 0666: the container's user is not ours
                             f"the engine's grading API at {parts.hostname}:{parts.port}")
    return path, server


async def _supervise(handle, log_dir: Path, stopped_early: bool) -> None:
    from autorl_tui.executors.docker import write_deadline

    loop = asyncio.get_running_loop()
    pending: set[asyncio.Task] = set()

    def later(coro) -> None:
        task = loop.create_task(coro)
        pending.add(task)
        task.add_done_callback(pending.discard)

    def kill() -> None:
        try:
            reason = (log_dir / "kill_reason").read_text().strip() or "killed"
        except OSError:        # no kill asked by the engine: PR_SET_PDEATHSIG, the actor died
            # As the local shim's agent, which dies with its actor leaving no exit.json: the engine
            # counts the attempt lost (its node left, or its actor was killed) and retries the run.
            reason = "killed"
            handle.exit_extra = {"reason": "node_lost", "error": "the run's Ray actor died; its container was killed"}
        later(handle.kill(reason))

    loop.add_signal_handler(signal.SIGTERM, kill)
    loop.add_signal_handler(signal.SIGUSR1, lambda: later(handle.pause()))
    loop.add_signal_handler(signal.SIGUSR2, lambda: later(handle.resume()))
    if stopped_early:      # SIGTERM came while the container was being created
        kill()
    waiter = loop.create_task(handle.wait())
    deadline = None
    while not waiter.done():
        try:
            extended = float((log_dir / "deadline").read_text())
        except (OSError, ValueError):
            extended = None
        if extended is not None and extended != deadline:
            deadline = extended
            await asyncio.to_thread(write_deadline, log_dir, extended)
        await asyncio.wait({waiter}, timeout=DEADLINE_POLL_S)
    await waiter


def parent_death_signal(sig: int) -> None:
    """PR_SET_PDEATHSIG: `sig` when the parent (the thread that forked us) ends."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def main(launch_path: str) -> int:
    """Ray SIGKILLs a worker's direct children when the worker notices its node's raylet died, so
    this process only forks the shim proper and relays the actor's signals to it; when this one is
    killed, the shim gets SIGTERM (PR_SET_PDEATHSIG) and still stops its container."""
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        parent_death_signal(signal.SIGTERM)
        if os.getppid() != parent:        # gone before the prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)
        os._exit(_shim(launch_path))

    def relay(signum, _frame) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, relay)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _shim(launch_path: str) -> int:
    from autorl_tui.executors.docker import DockerExecutor, DockerHandle, write_json

    log_dir = Path(launch_path).parent
    launch = json.loads(Path(launch_path).read_text())
    gpu_ids = launch.get("gpu_ids") or []
    folder = server = None
    early: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: early.append(1))     # until _supervise handles it
    try:
        try:
            network = launch["container"].get("network", "none")
            sock = None
            if network != "host" and launch["container"]["env"].get("GRADING_SERVER_URL"):
                sock, server = _api_forwarder(launch["container"]["env"]["GRADING_SERVER_URL"])
                folder = sock.parent
            spec = node_spec(launch, gpu_ids, sock)
            executor = DockerExecutor(home=launch["home"])
            container = executor.create(spec)
        except (ExecutorError, OSError) as exc:
            write_json(log_dir / "exit.json", {"reason": "container_failed", "error": str(exc), "exit_code": -1,
                                                "ended_at": time.time()})
            return 1
        write_json(log_dir / "shim.json", {"pid": os.getpid(), "container_id": container.id,
                                            "gpu_ids": spec.gpus, "started_at": time.time()})
        handle = DockerHandle(executor.client, container, spec)
        asyncio.run(_supervise(handle, log_dir, bool(early)))
        return 0
    finally:
        if server is not None:
            server.close()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

"""One agent container run to its end by a process: the docker executor on a Ray node.

    python -m autorl_tui.engine.executors.docker_shim LOG_DIR/launch.json

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
- signals from the actor: SIGTERM kills the container (also sent by the kernel when the actor
  dies: PR_SET_PDEATHSIG), SIGUSR1/SIGUSR2 pause/resume it; the deadline the engine extends
  (`LOG_DIR/deadline`) is copied to the container's control file.
"""

from __future__ import annotations

import asyncio
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

from autorl_tui.engine.executors.base import ExecutorError, LaunchSpec

MODULE = "autorl_tui.engine.executors.docker_shim"
DEADLINE_POLL_S = 1.0


def container_launch(spec: LaunchSpec, home: Path) -> dict:
    """What the run actor hands this shim (its `launch.json`)."""
    return {"container": spec.to_dict(), "home": str(Path(home).resolve()), "log_dir": str(spec.log_dir),
            "deadline": spec.deadline}


def node_spec(launch: dict, gpu_ids: list[str], socket_path: Path | None) -> LaunchSpec:
    """The spec as the docker executor runs it on this node: Ray's GPUs, the node's API socket."""
    spec = LaunchSpec.from_dict(launch["container"])
    spec.gpus = [str(g) for g in gpu_ids]
    spec.grading_socket = socket_path
    spec.placement = {}
    return spec


def _api_forwarder(grading_url: str) -> tuple[Path, socket.socket]:
    """A Unix socket (in a node-local folder the container user may traverse) whose connections
    go to the engine's grading API."""
    from autorl_tui.engine.executors.container_init import serve

    parts = urlsplit(grading_url)
    if not parts.hostname or not parts.port:
        raise ExecutorError(f"the run's grading URL {grading_url!r} names no HOST:PORT")
    folder = Path(tempfile.mkdtemp(prefix="autorl-api-"))
    os.chmod(folder, 0o711)
    path = folder / "grading.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chmod(path, 0o666)     # the container's user is not ours
    server.listen(64)

    def upstream() -> socket.socket:
        return socket.create_connection((parts.hostname, parts.port), timeout=30)
    upstream.what = f"the engine's grading API at {parts.hostname}:{parts.port}"
    serve(server, upstream)
    return path, server


async def _supervise(handle, log_dir: Path, stopped_early: bool) -> None:
    from autorl_tui.engine.executors.docker import write_deadline

    loop = asyncio.get_running_loop()
    pending: set[asyncio.Task] = set()

    def later(coro) -> None:
        task = loop.create_task(coro)
        pending.add(task)
        task.add_done_callback(pending.discard)

    def kill() -> None:
        try:
            reason = (log_dir / "kill_reason").read_text().strip() or "killed"
        except OSError:
            reason = "killed"
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


def main(launch_path: str) -> int:
    from autorl_tui.engine.executors.docker import DockerExecutor, DockerHandle, write_json

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

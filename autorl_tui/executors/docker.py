"""The Docker executor: one container per run attempt, through the `docker` SDK.

What the container sees (see docs/docker.md):
- the workspace, read-write, at the same path as on the host (so the env's paths stay valid);
- the spec's mounts (base model, train data), read-only;
- with the default offline image: the host system and the agent runtime read-only
  (images.host_runtime_mounts; executors/agent_runtime.py), never the harness's environment;
- the entry script `container_init.py` (read-only), a control folder holding the deadline
  (read-only), and the grading API's socket folder when the network is not `host`.
Nothing else of the host. GPUs by explicit device ids; network `none` (default), `bridge` or
`host`; CPU and memory limits; a non-root user; labels `autorl.run_id`, `autorl.home`,
`autorl.attempt` on every container so a restarted engine can re-adopt or reap it.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncio
import dataclasses
import json
import os
import re
import signal
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from autorl_tui.executors.agent_runtime import AgentRuntimeMissing, path_first
from autorl_tui.executors.agent_runtime import find as find_agent_runtime
from autorl_tui.isolation import container_init
from autorl_tui.executors import images
from autorl_tui.executors.gpus import device_uuids
from autorl_tui.executors.base import AgentHandle, Executor, ExecutorError, LaunchSpec, Mount
from autorl_tui.executors.docker_logs import LogPump, Positions

NETWORKS = ("none", "bridge", "host")
FORWARD_PORT = 18080                       # inside the container's own network namespace
INIT_TARGET = "/opt/autorl-tui/container_init.py"
CONTROL_TARGET = "/run/autorl-control"
GRADING_TARGET = "/run/autorl-grading"
NOBODY = "65534:65534"
LABEL_RUN, LABEL_HOME, LABEL_ATTEMPT = "autorl.run_id", "autorl.home", "autorl.attempt"
_INIT_SOURCE = Path(container_init.__file__)   # the container's entry program (stdlib only), bound read-only


def _client(timeout: int = 30):
    try:
        import docker
    except ImportError as exc:
        raise ExecutorError("the docker executor needs the docker SDK: pip install 'autorl-tui[docker]'") from exc
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
        return client
    except Exception as exc:
        raise ExecutorError(
            f"cannot reach the Docker Engine ({exc}); start it (e.g. `sudo dockerd` or "
            "`scripts/system-deps.sh`) or set DOCKER_HOST, or use the local executor") from exc


def container_name(run_id: str, attempt: int, home: str) -> str:
    import hashlib

    safe = re.sub(r"[^a-zA-Z0-9_.-]", "-", run_id)[:80]
    return f"autorl-{safe}-a{attempt}-{hashlib.sha256(home.encode()).hexdigest()[:6]}"


def _grading_url_in_container(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme or "http", f"127.0.0.1:{FORWARD_PORT}", parts.path, parts.query, ""))


def build_container_config(spec: LaunchSpec, *, image: str, runtime_mounts: list[Mount], python: str,
                           home: str, user: str | None, pids_limit: int = 4096,
                           read_only_root: bool = False, tmpfs: dict[str, str] | None = None,
                           device_ids: list[str] | None = None) -> dict:
    """The keyword arguments of `containers.create` for this spec (pure: testable without Docker).
    `device_ids`: the spec's GPUs as the daemon should read them (UUIDs); default the spec's ids."""
    from docker.types import DeviceRequest, Mount as DockerMount

    if spec.network not in NETWORKS:
        raise ExecutorError(f"network {spec.network!r} is not one of {NETWORKS}")
    workspace = str(Path(spec.workspace).resolve())
    binds: dict[str, DockerMount] = {}      # by target: a later bind of the same target wins

    def bind(source: Path | str, target: str, read_only: bool) -> None:
        binds[target] = DockerMount(target=target, source=str(source), type="bind", read_only=read_only)

    for m in runtime_mounts:
        bind(m.source, m.target, True)
    bind(workspace, workspace, False)
    for m in spec.mounts:
        target = m.target if m.target.startswith("/") else os.path.join(workspace, m.target)
        if not Path(m.source).exists():
            raise ExecutorError(f"mount source {m.source} does not exist (target {target})")
        bind(Path(m.source).resolve(), target, m.read_only)
    bind(_INIT_SOURCE, INIT_TARGET, True)
    control = Path(spec.log_dir) / "control"
    bind(control, CONTROL_TARGET, True)

    env = dict(spec.env)
    if spec.gpus:
        # inside the container only the requested devices exist, renumbered from 0
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(len(spec.gpus)))
    elif "CUDA_VISIBLE_DEVICES" in env:
        env["CUDA_VISIBLE_DEVICES"] = ""
    argv = [python, INIT_TARGET, "--container", "--deadline", repr(float(spec.deadline)),
            "--deadline-file", f"{CONTROL_TARGET}/deadline"]
    if spec.container.grading_socket is not None and spec.network != "host":
        bind(Path(spec.container.grading_socket).parent, GRADING_TARGET, True)
        argv += ["--listen", f"127.0.0.1:{FORWARD_PORT}",
                 "--socket", f"{GRADING_TARGET}/{Path(spec.container.grading_socket).name}"]
        if env.get("GRADING_SERVER_URL"):
            env["GRADING_SERVER_URL"] = _grading_url_in_container(env["GRADING_SERVER_URL"])
    command = ["/bin/sh", "-c", spec.command] if isinstance(spec.command, str) else list(spec.command)
    argv += ["--", *command]

    labels = {**spec.labels, LABEL_RUN: spec.run_id, LABEL_HOME: home, LABEL_ATTEMPT: str(spec.attempt),
              "autorl.executor": "docker"}
    config = dict(
        image=image, command=argv, name=container_name(spec.run_id, spec.attempt, home),
        environment=env, working_dir=workspace, mounts=list(binds.values()), labels=labels,
        network_mode=spec.network, init=True, detach=True, stdin_open=False, tty=False,
        cap_drop=["ALL"], security_opt=["no-new-privileges"], pids_limit=pids_limit,
        log_config={"type": "json-file", "config": {}},
    )
    if user:
        config["user"] = user
    if read_only_root:
        config["read_only"] = True
        config["tmpfs"] = {"/tmp": "rw,nosuid,nodev,size=1g,mode=1777"}
    if tmpfs:
        config["tmpfs"] = {**config.get("tmpfs", {}), **tmpfs}
    if spec.cpus:
        config["nano_cpus"] = int(spec.cpus * 1e9)
    if spec.memory_bytes:
        config["mem_limit"] = int(spec.memory_bytes)
        config["memswap_limit"] = int(spec.memory_bytes)   # no swap beyond the limit
    if spec.gpus:
        # By UUID (executors/gpus.py device_uuids): the daemon's numbering need not be the caller's.
        config["device_requests"] = [DeviceRequest(device_ids=list(device_ids or [str(g) for g in spec.gpus]),
                                                   capabilities=[["gpu"]])]
    return config


def _make_writable_for(workspace: Path, uid: int, gid: int, skip: set[str]) -> None:
    """Give the container user the workspace (not hardlinked harness files, not mount targets)."""
    for dirpath, dirnames, filenames in os.walk(workspace):
        if dirpath in skip:
            dirnames[:] = []
            continue
        os.lchown(dirpath, uid, gid)
        dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) not in skip]
        for name in filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if st.st_nlink == 1:
                os.lchown(p, uid, gid)


def write_json(path: Path, data: dict) -> None:
    """Atomically (a reader never sees half of it): exit.json, and the container shim's shim.json."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


class DockerHandle(AgentHandle):
    def __init__(self, client, container, spec: LaunchSpec, *, remove_on_exit: bool = True):
        self.client, self.container, self.spec = client, container, spec
        self.stdout_path, self.stderr_path = spec.stdout_path, spec.stderr_path
        self.remove_on_exit = remove_on_exit
        self._exit_code: int | None = None
        self._kill_reason: str | None = None
        self.exit_extra: dict = {}          # merged into exit.json (the container shim's node_lost)
        positions = Positions(spec.log_dir, container.id)
        self.pumps = [LogPump(client, container.id, "stdout", spec.stdout_path, positions, spec.log_file_bytes),
                      LogPump(client, container.id, "stderr", spec.stderr_path, positions, spec.log_file_bytes)]
        for p in self.pumps:
            p.start()

    def ident(self) -> dict:
        return {"container_id": self.container.id}

    def exit_info(self) -> dict | None:
        """What wait() recorded (exit.json), None before: the engine takes the end's reason from it.
        Without it a container its own guard killed at the deadline before the engine's kill (the
        engine then finds it no longer alive and never kills it) was recorded as exiting on its own
        with 137, a failure of the agent (issue 31)."""
        if self._exit_code is None:
            return None
        try:
            return json.loads(self.spec.exit_path.read_text())
        except (OSError, ValueError):
            return None

    def _state(self) -> dict:
        self.container.reload()
        return self.container.attrs.get("State", {})

    def is_alive(self) -> bool:
        if self._exit_code is not None:
            return False
        try:
            return self._state().get("Status") in ("created", "running", "paused", "restarting")
        except Exception:
            return False

    def pids(self) -> list[int]:
        try:
            pid = int(self._state().get("Pid") or 0)
            if not pid:
                return []
            import psutil

            return [pid] + [c.pid for c in psutil.Process(pid).children(recursive=True)]
        except Exception:
            return []

    async def wait(self) -> int:
        if self._exit_code is not None:
            return self._exit_code
        try:
            result = await asyncio.to_thread(self.container.wait)
        except Exception as exc:
            if type(exc).__name__ == "NotFound":
                raise ExecutorError(f"container {self.container.short_id} was removed behind the harness's back") from exc
            raise ExecutorError(f"lost contact with container {self.container.short_id}: {exc}") from exc
        code = int(result.get("StatusCode", -1))
        for p in self.pumps:
            await asyncio.to_thread(p.join_while_copying)
        state = await asyncio.to_thread(self._state)
        if self._kill_reason is not None:
            code = -signal.SIGKILL
        self._exit_code = code
        error = None
        if code == 127 and self.spec.container.image:
            try:
                tail = self.spec.stderr_path.read_bytes()[-2000:].decode(errors="replace")
            except OSError:
                tail = ""
            if "exec python3 failed" in tail:
                error = (f"image {self.spec.container.image} has no python3 on its PATH; the container's entry program "
                         "needs it (any Python 3.8+), or leave `image:` unset to use the offline runtime image")
        # the container's entry program kills it at the deadline, as the harness would; when it got
        # there first, the run still ended by its budget (as the local shim records it)
        deadline_reached = (self._kill_reason is None and state.get("ExitCode") == 137
                            and time.time() >= self.spec.deadline - 1)
        write_json(self.spec.exit_path, {
            "error": error,
            "exit_code": code, "container_status": int(result.get("StatusCode", -1)),
            "oom_killed": bool(state.get("OOMKilled")), "killed": self._kill_reason,
            "deadline_reached": deadline_reached, **({"reason": "deadline"} if deadline_reached else {}),
            "finished_at": state.get("FinishedAt"), "container_id": self.container.id, **self.exit_extra})
        if self.remove_on_exit:
            try:
                await asyncio.to_thread(self.container.remove, force=True)
            except Exception:
                pass
        return code

    async def kill(self, reason: str) -> None:
        self._kill_reason = reason
        await asyncio.to_thread(self._kill)

    def _kill(self) -> None:
        import docker.errors

        for _ in range(2):
            try:
                self.container.kill()
                return
            except docker.errors.NotFound:
                return
            except docker.errors.APIError as exc:
                text = str(exc)
                if "is not running" in text:
                    return
                if "paused" in text.lower():
                    # Docker refuses to kill a paused container: thaw it, then kill at once
                    self.container.unpause()
                    continue
                raise ExecutorError(f"cannot kill container {self.container.short_id}: {exc}") from exc
        self.container.kill()

    async def pause(self) -> None:
        await asyncio.to_thread(self.container.pause)

    async def resume(self) -> None:
        await asyncio.to_thread(self.container.unpause)

    async def extend_deadline(self, deadline: float) -> None:
        self.spec.deadline = deadline
        _write_control(self.spec)

    def detach(self) -> None:
        """Stop copying logs (the engine is going away; a re-adopting engine resumes them)."""
        for p in self.pumps:
            p.stop()


class FinishedHandle(AgentHandle):
    """A container that ended and was already recorded (exit.json) before the engine restarted."""

    def __init__(self, spec: LaunchSpec, record: dict):
        self.spec, self.record = spec, record
        self.stdout_path, self.stderr_path = spec.stdout_path, spec.stderr_path

    def ident(self) -> dict:
        return {"container_id": self.record.get("container_id")}

    def exit_info(self) -> dict | None:
        return self.record

    def is_alive(self) -> bool:
        return False

    async def wait(self) -> int:
        return int(self.record["exit_code"])

    async def kill(self, reason: str) -> None:
        return None


def _write_control(spec: LaunchSpec) -> None:
    write_deadline(Path(spec.log_dir), spec.deadline)


def write_deadline(log_dir: Path, deadline: float) -> None:
    """The deadline the container's entry program re-reads (its control folder, bound read-only)."""
    control = Path(log_dir) / "control"
    control.mkdir(parents=True, exist_ok=True)
    os.chmod(control, 0o755)
    f = control / "deadline"
    tmp = control / "deadline.tmp"
    tmp.write_text(repr(float(deadline)))
    os.chmod(tmp, 0o644)
    os.replace(tmp, f)


class DockerExecutor(Executor):
    name = "docker"
    takes_images = True
    grading_over_socket = True
    leaves_leftovers = True

    @classmethod
    def isolation_label(cls, isolation: str) -> str:
        return "docker"

    @classmethod
    def runs_in_container(cls, options: dict) -> bool:
        return True

    def check_host(self, isolation: str, devices: Sequence[str] = ()) -> str | None:
        ok, why = self.available()
        return None if ok else f"executor docker is not available here: {why}"

    def reap_leftovers(self, live: set[str]) -> list[str]:
        if not self.available()[0]:
            return []
        return self.reap(live=live)

    def __init__(self, home: str | Path | None = None, user: str | None = None, remove_on_exit: bool = True,
                 pids_limit: int = 4096, client=None):
        """`home`: the autorl-tui home (labels every container; `spec.labels["autorl.home"]` also
        works). `user`: "uid:gid" to run as; default: the harness's own uid, or nobody
        (65534:65534) when the harness runs as root."""
        self.home = str(Path(home).resolve()) if home else None
        self.user = user
        self.remove_on_exit = remove_on_exit
        self.pids_limit = pids_limit
        self._client = client

    @property
    def client(self):
        if self._client is None:
            self._client = _client()
        return self._client

    def available(self) -> tuple[bool, str]:
        try:
            client = self._client or _client(timeout=5)
            version = client.version()
            return True, f"Docker Engine {version.get('Version')} ({client.api.base_url})"
        except ExecutorError as exc:
            return False, str(exc)
        except Exception as exc:
            return False, f"Docker Engine unusable: {exc}"

    def _home_of(self, spec: LaunchSpec) -> str:
        home = spec.labels.get(LABEL_HOME) or self.home
        if not home:
            raise ExecutorError("DockerExecutor needs the autorl-tui home (DockerExecutor(home=...)) to label containers")
        return home

    def _user(self) -> tuple[str, int, int]:
        if self.user:
            uid, _, gid = self.user.partition(":")
            return self.user, int(uid), int(gid or uid)
        if os.getuid() != 0:
            return f"{os.getuid()}:{os.getgid()}", os.getuid(), os.getgid()
        return NOBODY, 65534, 65534

    def _prepare_host_side(self, spec: LaunchSpec, uid: int, gid: int) -> None:
        Path(spec.log_dir).mkdir(parents=True, exist_ok=True)
        _write_control(spec)
        workspace = Path(spec.workspace).resolve()
        if not workspace.is_dir():
            raise ExecutorError(f"workspace {workspace} does not exist")
        for m in spec.mounts:
            if not Path(m.source).exists():
                raise ExecutorError(f"mount source {m.source} does not exist (target {m.target})")
        if uid != os.getuid():
            for m in spec.mounts:
                mode = os.stat(m.source).st_mode
                need = 0o005 if Path(m.source).is_dir() else 0o004
                if mode & need != need:
                    raise ExecutorError(
                        f"mount source {m.source} is not readable by the container user {uid}:{gid}; make it "
                        f"world-readable (chmod -R o+rX {m.source}) or run the executor as a user that owns it")
        if uid != os.getuid() and os.getuid() == 0:
            skip = {str(workspace / m.target) if not m.target.startswith("/") else m.target for m in spec.mounts}
            _make_writable_for(workspace, uid, gid, skip)
        if spec.container.grading_socket is not None and spec.network != "host":
            sock = Path(spec.container.grading_socket)
            if not sock.parent.is_dir():
                raise ExecutorError(f"grading socket folder {sock.parent} does not exist")
            if uid != os.getuid():
                # the container user must traverse the folder and connect to the socket
                os.chmod(sock.parent, os.stat(sock.parent).st_mode | 0o011)
                if sock.exists():
                    os.chmod(sock, 0o666)

    def create(self, spec: LaunchSpec):
        """Create and start the attempt's container (blocking); raises ExecutorError."""
        import docker.errors

        home = self._home_of(spec)
        user, uid, gid = self._user()
        client = self.client
        if spec.container.image:
            image, runtime, python, read_only_root, hidden = spec.container.image, [], "python3", False, {}
            try:
                client.images.get(image)
            except docker.errors.ImageNotFound:
                raise ExecutorError(
                    f"image {image!r} is not in the local Docker Engine; `docker pull`/`docker load` it first, "
                    "or leave `image:` unset to use the offline runtime image") from None
        else:
            try:
                agent_rt = find_agent_runtime()
            except AgentRuntimeMissing as exc:
                raise ExecutorError(str(exc)) from None
            image = images.ensure_runtime_image(client)
            runtime, python, read_only_root = images.host_runtime_mounts(agent_rt), str(agent_rt.python), True
            hidden = images.hidden_tmpfs(agent_rt)
            spec = dataclasses.replace(spec, env=path_first(spec.env, agent_rt))
        self._prepare_host_side(spec, uid, gid)
        config = build_container_config(spec, image=image, runtime_mounts=runtime, python=python, home=home,
                                         user=user, pids_limit=self.pids_limit, read_only_root=read_only_root,
                                         tmpfs=hidden, device_ids=device_uuids(spec.gpus) if spec.gpus else None)
        try:
            stale = client.containers.get(config["name"])
        except docker.errors.NotFound:
            stale = None
        if stale is not None:
            stale.reload()
            if stale.status in ("running", "paused", "restarting"):
                raise ExecutorError(f"container {config['name']} is already running for this attempt; adopt it")
            stale.remove(force=True)
        try:
            container = client.containers.create(**config)
            container.start()
        except docker.errors.APIError as exc:
            try:
                client.containers.get(config["name"]).remove(force=True)
            except Exception:
                pass
            hint = ""
            if spec.container.image and "python3" in str(exc):
                hint = (f" (image {spec.container.image} must have python3 on its PATH: it runs the container's entry "
                        "program; or leave `image:` unset to use the offline runtime image)")
            if spec.gpus and "capabilities" in str(exc):
                hint = " (GPUs need the NVIDIA Container Toolkit: nvidia-ctk runtime configure --runtime=docker)"
            raise ExecutorError(f"container for {spec.run_id} attempt {spec.attempt} failed to start: "
                                f"{exc.explanation or exc}{hint}") from exc
        return container

    async def start(self, spec: LaunchSpec) -> DockerHandle:
        container = await asyncio.to_thread(self.create, spec)
        return DockerHandle(self.client, container, spec, remove_on_exit=self.remove_on_exit)

    def _find(self, attempt: dict, spec: LaunchSpec):
        import docker.errors

        client = self.client
        cid = attempt.get("container_id")
        if cid:
            try:
                c = client.containers.get(cid)
                if c.labels.get(LABEL_RUN) == spec.run_id and c.labels.get(LABEL_HOME) == self._home_of(spec):
                    return c
            except docker.errors.NotFound:
                pass
        number = attempt.get("number", spec.attempt)
        found = client.containers.list(all=True, ignore_removed=True, filters={"label": [
            f"{LABEL_RUN}={spec.run_id}", f"{LABEL_ATTEMPT}={number}", f"{LABEL_HOME}={self._home_of(spec)}"]})
        return found[0] if found else None

    async def adopt(self, attempt: dict, spec: LaunchSpec) -> AgentHandle | None:
        """The container of this attempt, with its log copy resumed where it stopped. If the
        container is gone but its end was recorded (exit.json), a finished handle; else None."""
        container = await asyncio.to_thread(self._find, attempt, spec)
        if container is not None:
            return DockerHandle(self.client, container, spec, remove_on_exit=self.remove_on_exit)
        try:
            return FinishedHandle(spec, json.loads(Path(spec.exit_path).read_text()))
        except (OSError, ValueError, KeyError):
            return None

    def containers(self, home: str | Path | None = None) -> list[dict]:
        """[{container_id, name, run_id, attempt, status}] of this home's containers."""
        return list_containers(self.client, str(Path(home).resolve()) if home else self.home)

    def reap(self, home: str | Path | None = None, live: set[str] | None = None) -> list[str]:
        """Remove this home's labelled containers whose id is not in `live` (ids or id prefixes).
        Returns the removed container ids."""
        return reap(self.client, str(Path(home).resolve()) if home else self.home, live or set())


def list_containers(client, home: str) -> list[dict]:
    """This home's labelled containers (for the engine's reconciliation on start)."""
    out = []
    for c in client.containers.list(all=True, ignore_removed=True, filters={"label": f"{LABEL_HOME}={home}"}):
        out.append({"container_id": c.id, "name": c.name, "run_id": c.labels.get(LABEL_RUN),
                    "attempt": int(c.labels.get(LABEL_ATTEMPT) or 0), "status": c.status})
    return out


def reap(client, home: str, live: set[str]) -> list[str]:
    removed = []
    for c in client.containers.list(all=True, ignore_removed=True, filters={"label": f"{LABEL_HOME}={home}"}):
        if any(c.id.startswith(x) for x in live if x):
            continue
        c.remove(force=True)
        removed.append(c.id)
    return removed

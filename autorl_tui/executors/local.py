"""Local executor: the agent runs on this host in the workspace, in its own session, under a
supervising shim (`local_shim.py`) that is a child subreaper and enforces the deadline itself,
inside a bubblewrap sandbox as a leased unprivileged uid (`sandbox_bwrap.py`; docs/security.md),
unless the run's plan said `isolation: none`."""

from __future__ import annotations

from collections.abc import Sequence

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from autorl_tui.executors.agent_runtime import AgentRuntime, AgentRuntimeMissing, find, path_first
from autorl_tui.executors.base import AgentHandle, AgentStartError, Executor, ExecutorError, LaunchSpec
from autorl_tui import settings

SHIM_MODULE = "autorl_tui.executors.local_shim"
DEVICE_ROOT_ENV = "AUTORL_DEVICE_ROOT"     # sandbox_bwrap.DEVICE_ROOT_ENV (not imported: it is the shim's)


def _pid_is_shim(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(SHIM_MODULE.encode() in part for part in cmdline)


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class LocalHandle(AgentHandle):
    def __init__(self, shim_pid: int, log_dir: Path, popen: subprocess.Popen | None = None):
        self.shim_pid = shim_pid
        self.log_dir = log_dir
        self.stdout_path = log_dir / "stdout.log"
        self.stderr_path = log_dir / "stderr.log"
        self._popen = popen

    def ident(self) -> dict:
        return {"pid": self.shim_pid}

    def _shim_alive(self) -> bool:
        if self._popen is not None:
            return self._popen.poll() is None
        return _pid_is_shim(self.shim_pid)

    def is_alive(self) -> bool:
        return self._shim_alive() and not (self.log_dir / "exit.json").exists()

    def exit_info(self) -> dict | None:
        return _read_json(self.log_dir / "exit.json")

    async def wait(self) -> int:
        while True:
            info = self.exit_info()
            if info is not None:
                if self._popen is not None:
                    await asyncio.to_thread(self._popen.wait)
                return int(info.get("exit_code", -1))
            if not self._shim_alive():
                info = self.exit_info()   # it may have written exit.json just before exiting
                if info is not None:
                    return int(info.get("exit_code", -1))
                return -int(signal.SIGKILL)
            await asyncio.sleep(0.2)

    def _signal(self, sig: int) -> None:
        if self._shim_alive():
            try:
                os.kill(self.shim_pid, sig)
            except ProcessLookupError:
                pass

    async def kill(self, reason: str) -> None:
        (self.log_dir / "kill_reason").write_text(reason)
        self._signal(signal.SIGTERM)
        for _ in range(100):
            if not self._shim_alive() or self.exit_info() is not None:
                return
            await asyncio.sleep(0.05)

    async def pause(self) -> None:
        self._signal(signal.SIGUSR1)

    async def resume(self) -> None:
        self._signal(signal.SIGUSR2)

    async def extend_deadline(self, deadline: float) -> None:
        tmp = self.log_dir / "deadline.tmp"
        tmp.write_text(repr(deadline))
        os.replace(tmp, self.log_dir / "deadline")

    def pids(self) -> list[int]:
        from autorl_tui.executors.local_shim import descendants

        return descendants(self.shim_pid) if self._shim_alive() else []


class LocalExecutor(Executor):
    name = "local"
    on_this_host = True

    def __init__(self, python: str | None = None):
        self.python = python or sys.executable

    @classmethod
    def for_engine(cls, home: Path) -> "LocalExecutor":
        return cls()

    def check_host(self, isolation: str, devices: Sequence[str] = ()) -> str | None:
        if isolation == "none":
            return None
        mig = [d for d in devices if d.startswith("MIG-")]
        if mig:
            return (f"this engine's GPUs include MIG instances ({', '.join(mig)}), which the bubblewrap sandbox "
                    f"cannot give an agent (it binds whole GPUs' device nodes only); use `executor: docker`, or give "
                    f"the engine whole GPUs (CUDA_VISIBLE_DEVICES or --gpus)")
        ok, why = self.available()
        if ok:
            return None
        from autorl_tui.isolation.sandbox_bwrap import FIX

        return f"executor local cannot isolate agents on this host ({why}); {FIX}"

    def available(self) -> tuple[bool, str]:
        from autorl_tui.isolation.sandbox_bwrap import probe

        return probe()

    async def start(self, spec: LaunchSpec) -> AgentHandle:
        launch_path = write_launch(spec.log_dir, launch_of(spec))
        try:
            popen = spawn_shim(self.python, launch_path)
        except OSError as exc:
            raise ExecutorError(f"could not start the local shim: {exc}") from exc
        handle = LocalHandle(popen.pid, spec.log_dir, popen)
        await wait_for_shim(spec.log_dir, lambda: popen.poll() is None, handle.kill,
                            exited=lambda: f"the local shim exited with code {popen.returncode} before starting the agent")
        return handle

    async def adopt(self, attempt: dict, spec: LaunchSpec) -> AgentHandle | None:
        pid = attempt.get("pid")
        if not pid:
            return None
        handle = LocalHandle(int(pid), spec.log_dir)
        if _pid_is_shim(int(pid)) or handle.exit_info() is not None:
            return handle
        return None


def launch_of(spec: LaunchSpec) -> dict:
    """What the shim reads (`launch.json`): the command, its environment (the agent runtime's bin/
    first on PATH), the deadline, the sandbox."""
    try:
        runtime = find()
    except AgentRuntimeMissing as exc:
        raise ExecutorError(str(exc)) from None
    spec = dataclasses.replace(spec, env=path_first(spec.env, runtime))
    return {"command": spec.command, "workspace": str(spec.workspace), "env": spec.env,
            "log_dir": str(spec.log_dir), "deadline": spec.deadline, "sandbox": _sandbox(spec, runtime),
            "log_file_bytes": spec.log_file_bytes}


def write_launch(log_dir: Path, launch: dict) -> Path:
    """Clear what an earlier start left and write `launch.json` (0600: it holds the token) and `deadline`."""
    log_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("exit.json", "shim.json", "kill_reason"):
        (log_dir / stale).unlink(missing_ok=True)
    launch_path = log_dir / "launch.json"
    fd = os.open(launch_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(launch, fh)
    (log_dir / "deadline").write_text(repr(launch["deadline"]))
    return launch_path


def spawn_shim(python: str, launch_path: Path, preexec_fn=None, module: str = SHIM_MODULE) -> subprocess.Popen:
    """Start the shim in its own session; its output goes to `shim.log` next to `launch.json`.
    `module`: another shim with the same contract (a cluster node's container: docker_shim.py)."""
    log_dir = launch_path.parent
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": _package_root()}
    if settings.current().device_root:   # stand-in GPU device nodes (tests)
        env[DEVICE_ROOT_ENV] = str(settings.current().device_root)
    with open(log_dir / "shim.log", "ab") as shim_log:
        return subprocess.Popen([python, "-m", module, str(launch_path)], stdin=subprocess.DEVNULL,
                                stdout=shim_log, stderr=shim_log, start_new_session=True, env=env,
                                cwd=str(log_dir), preexec_fn=preexec_fn)


async def wait_for_shim(log_dir: Path, alive, kill, exited, timeout_s: float = 20) -> None:
    """Until the shim has started the agent (`shim.json`) or recorded why not (`exit.json`).
    `alive()` says whether the shim still runs; `exited()` words its early end."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if (log_dir / "shim.json").exists() or (log_dir / "exit.json").exists():
            break
        if not alive():
            if (log_dir / "exit.json").exists():
                break
            raise ExecutorError(f"{exited()}; see {log_dir / 'shim.log'}")
        await asyncio.sleep(0.02)
    else:
        await kill("start timeout")
        raise ExecutorError(f"the shim did not start the agent within {timeout_s:.0f} s")
    info = _read_json(log_dir / "exit.json")
    if info and info.get("reason") == "start_failed":
        raise AgentStartError(f"could not start the agent command: {info.get('error')}")
    if info and info.get("reason") == "sandbox_failed":
        raise ExecutorError(f"could not set up the agent's sandbox: {info.get('error')}")
    if info and info.get("reason") == "container_failed":
        raise ExecutorError(f"could not start the agent's container: {info.get('error')}")


def _sandbox(spec: LaunchSpec, runtime: AgentRuntime) -> dict | None:
    """What the agent's sandbox binds (see sandbox_bwrap.py); None when the run is unisolated.
    Its Python is the agent runtime (executors/agent_runtime.py), never the harness's environment."""
    from autorl_tui.isolation.sandbox_bwrap import bwrap_path

    if not spec.sandbox.isolate:
        return None
    ro = [m.source for m in spec.mounts if m.target.startswith("/")]   # the agent's program folder
    dirs = spec.env.get("PATH", "").split(":")   # the agent stack's own executables (e.g. an npm prefix)
    if isinstance(spec.command, list) and spec.command and os.path.isabs(spec.command[0]):
        dirs.append(os.path.dirname(spec.command[0]))
    for d in dirs:
        if d and os.path.isabs(d) and not d.startswith(("/usr/", "/bin", "/sbin")) and os.path.isdir(d):
            ro.append(Path(d).parent if Path(d).name in ("bin", ".bin") else Path(d))   # bin/ links into its prefix
    workspace = spec.workspace
    return {"ro": [str(p) for p in ro], "writable": list(spec.writable),
            "ro_inside": [str(workspace / "models"), str(workspace / "data")],
            "hide": [str(p) for p in [*spec.sandbox.private_paths, *runtime.hidden()]],
            "gpus": [str(g) for g in spec.gpus],
            "network": spec.network, "host_ports": list(spec.sandbox.host_ports),
            "runtime": [str(p) for p in runtime.binds()], "bwrap": bwrap_path()}


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])

"""The detached engine process: `autorl-tui engine serve` runs the Engine and its socket server in
the foreground; `start_daemon` spawns that in the background (own session, so closing the
terminal does not kill it) and waits until its socket answers.

Stopping the engine (`shutdown` over the socket, SIGTERM or SIGINT) stops the scheduler and the
socket server and releases the home lock. By default runs are NOT cancelled: `Engine.stop()`
leaves running agents alone and the next engine started on the home reconciles and re-adopts
them (or marks them `lost`). `cancel_runs=True` cancels every active run first.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from autorl_tui.daemon.client import engine_is_running
from autorl_tui.exitcodes import InfraError
from autorl_tui.home import Home


@dataclass
class EngineOptions:
    """What the engine is started with (the global CLI options)."""
    agents_dirs: list[Path] = field(default_factory=list)
    tasks_dirs: list[Path] = field(default_factory=list)
    concurrency: int | None = None
    gpus: str | None = None          # '0,1' or 'none'; None: discover

    @classmethod
    def from_args(cls, args) -> "EngineOptions":
        return cls(agents_dirs=[Path(p).expanduser().resolve() for p in getattr(args, "agents_dir", []) or []],
                   tasks_dirs=[Path(p).expanduser().resolve() for p in getattr(args, "tasks_dir", []) or []],
                   concurrency=getattr(args, "concurrency", None), gpus=getattr(args, "gpus", None))

    def argv(self) -> list[str]:
        out: list[str] = []
        for d in self.agents_dirs:
            out += ["--agents-dir", str(d)]
        for d in self.tasks_dirs:
            out += ["--tasks-dir", str(d)]
        if self.concurrency is not None:
            out += ["--concurrency", str(self.concurrency)]
        if self.gpus is not None:
            out += ["--gpus", self.gpus]
        return out


def log_path(home: Home) -> Path:
    return home.root / "engine.log"


def start_daemon(home: Home, options: EngineOptions, timeout: float = 60.0) -> dict:
    """Start `autorl-tui engine serve` in the background unless an engine already answers.
    Returns the engine's `ping` answer (pid, started_at, ...)."""
    running = engine_is_running(home)
    if running:
        return running
    home.writer_store_path()     # a store elsewhere or on a network filesystem: one line here, not in the log
    home.ensure()
    log = log_path(home)
    cmd = [sys.executable, "-m", "autorl_tui", "--home", str(home.root), *options.argv(), "engine", "serve"]
    with open(log, "ab") as out:
        out.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(cmd)}\n".encode())
        out.flush()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True, cwd=str(home.root))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = engine_is_running(home, timeout=1.0)
        if answer:
            return answer
        if proc.poll() is not None:
            # Lost a race with another console starting the same engine? Then it answers.
            answer = engine_is_running(home, timeout=1.0)
            if answer:
                return answer
            raise InfraError(f"the engine exited during start-up (exit code {proc.returncode}); "
                             f"last lines of {log}:\n{tail(log)}")
        time.sleep(0.1)
    raise InfraError(f"the engine did not answer on {home.socket_path} within {timeout:.0f}s; see {log}:\n{tail(log)}")


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop_daemon(home: Home, cancel_runs: bool = False, timeout: float = 60.0) -> dict | None:
    """Ask the home's engine to stop and wait until its process is gone. None if none ran."""
    from autorl_tui.daemon.client import EngineClient, EngineNotRunning

    async def _ask():
        client = await EngineClient.connect(home)
        try:
            return await client.shutdown(cancel_runs=cancel_runs)
        finally:
            await client.close()

    try:
        answer = asyncio.run(_ask())
    except EngineNotRunning:
        return None
    pid = int(answer["pid"])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return answer
        time.sleep(0.1)
    raise InfraError(f"the engine (pid {pid}) did not stop within {timeout:.0f}s; "
                     f"`kill {pid}` stops it (runs are re-adopted by the next engine)")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours (tests start the daemon directly) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


async def serve(home: Home, options: EngineOptions) -> int:
    """Run the engine and its socket server until asked to stop."""
    from autorl_tui.engine.engine import Engine
    from autorl_tui.daemon.server import CatalogSources, EngineServer

    from autorl_tui.executors.gpus import inventory

    gpus = inventory(options.gpus).ids     # declared ids win; else NVML discovery; else CPU slots
    engine = Engine(home, concurrency=options.concurrency, gpus=gpus,
                    agents_dirs=options.agents_dirs, tasks_dirs=options.tasks_dirs, role="engine")
    await engine.start()
    stop = asyncio.Event()
    cancel = {"runs": False}

    def request_stop(cancel_runs: bool = False) -> None:
        cancel["runs"] = cancel["runs"] or cancel_runs
        stop.set()

    catalog = CatalogSources(home_root=home.root, agents_dirs=options.agents_dirs, tasks_dirs=options.tasks_dirs,
                             gpus=list(engine.gpu_inventory), concurrency=engine.concurrency)
    server = EngineServer(engine, home.socket_path, catalog=catalog, on_shutdown=request_stop)
    try:
        await server.start()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(sig, request_stop)
        print(f"engine pid {os.getpid()} serving {home.socket_path}", flush=True)
        await stop.wait()
    finally:
        await server.close()
        await engine.stop(cancel_runs=cancel["runs"])
    print(f"engine pid {os.getpid()} stopped (cancel_runs={cancel['runs']})", flush=True)
    return 0

"""A real Ray head started with `ray start --head` in a temporary folder, and stopped by killing
its own processes only (`ray stop` would stop every Ray process of the host: other tests' too)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil


START_TRIES = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RayHead:
    def __init__(self, *, token: str | None, num_cpus: int = 1, ports: tuple[int, int] | None = None):
        """token None: token authentication off (RAY_AUTH_MODE=disabled). ports: (GCS, client
        server) of a head started again on the address of one that was stopped."""
        self.ray = Path(sys.executable).with_name("ray")
        self.temp = Path("/tmp") / f"ray-{uuid.uuid4().hex[:6]}"      # Ray's socket paths must stay short
        self.gcs, self.client = ports or (free_port(), free_port())
        self.env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token" if token else "disabled")
        self.env.pop("RAY_ADDRESS", None)
        if token:
            self.env["RAY_AUTH_TOKEN"] = token
        else:
            self.env.pop("RAY_AUTH_TOKEN", None)
        command = [str(self.ray), "start", "--head", f"--port={self.gcs}", f"--ray-client-server-port={self.client}",
                   f"--temp-dir={self.temp}", f"--num-cpus={num_cpus}", "--include-dashboard=false",
                   "--disable-usage-stats"]
        # A loaded machine may keep `ray start` past its limit: what it started is ended (never left
        # running), and it is tried once more.
        for tries in range(1, START_TRIES + 1):
            try:
                proc = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=180)
                failure = None if proc.returncode == 0 else f"{proc.stdout[-2000:]} {proc.stderr[-2000:]}"
            except subprocess.TimeoutExpired:
                failure = "it did not return within 180 s"
            if failure is None:
                break
            self.stop()
            if tries == START_TRIES:
                raise RuntimeError(f"ray start failed: {failure}")
        self.host = next((p for p in self._procs() if "gcs_server" in " ".join(p.cmdline())), None)
        self.address = f"127.0.0.1:{self.gcs}"

    def wait_for_port(self, host: str, port: int, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        while True:
            try:
                socket.create_connection((host, port), timeout=2).close()
                return
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)

    def _procs(self) -> list[psutil.Process]:
        """This head's processes: those naming its folder or its GCS port, and their descendants."""
        marks = (str(self.temp), f":{self.gcs} ", f":{self.gcs}\0")
        mine: dict[int, psutil.Process] = {}
        for p in psutil.process_iter(["cmdline"]):
            cmd = "\0".join(p.info["cmdline"] or []) + "\0"
            if any(m.replace(" ", "\0") in cmd for m in marks):
                mine[p.pid] = p
                try:
                    mine.update({c.pid: c for c in p.children(recursive=True)})
                except psutil.Error:
                    pass
        return list(mine.values())

    def stop(self) -> None:
        procs = self._procs()
        for p in procs:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(procs, timeout=30)
        shutil.rmtree(self.temp, ignore_errors=True)

"""Resource samples of a run: CPU and RSS of the agent's process tree (psutil), the host's load
average, and GPU utilization and memory through NVML when present (executors/gpus.py is the seam)."""

from __future__ import annotations

import os

import psutil


class ProcessTreeSampler:
    def __init__(self) -> None:
        self._procs: dict[int, psutil.Process] = {}

    def sample(self, pids: list[int]) -> dict:
        cpu = 0.0
        rss = 0
        alive = 0
        current = {}
        for pid in pids:
            proc = self._procs.get(pid)
            try:
                if proc is None:
                    proc = psutil.Process(pid)
                    proc.cpu_percent(None)   # first call primes the counter
                current[pid] = proc
                cpu += proc.cpu_percent(None)
                rss += proc.memory_info().rss
                alive += 1
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        self._procs = current
        return {"cpu_percent": round(cpu, 1), "rss_bytes": rss, "n_procs": alive, "load": host_load()}


def host_load() -> list[float] | None:
    """The host's load average over 1, 5 and 15 minutes (None where the OS has none)."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None

"""Resource samples of a run: CPU and RSS of the agent's process tree (psutil), and GPU
utilization and memory through NVML when present (engine/gpus.py is the seam)."""

from __future__ import annotations

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
        return {"cpu_percent": round(cpu, 1), "rss_bytes": rss, "n_procs": alive}

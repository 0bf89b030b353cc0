"""A discrete-event simulator of the scheduling policy on a declared GPU inventory.

Used by the scheduler tests and `benchmarks/bench_scheduler.py`. Like the engine, it derives the
free devices from the live runs at every event and asks `decide` what to start; it checks at
every event that no device is held twice.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

from autorl_tui.engine.scheduling import ActiveRun, Decision, Policy, QueuedRun, decide


@dataclass(frozen=True)
class Job:
    run_id: str
    gpus: int
    arrival: float
    duration: float                  # how long it really runs
    budget_s: float                  # its budget: the scheduler's upper bound
    priority: int = 0


@dataclass
class SimResult:
    makespan: float
    busy_gpu_time: float
    n_gpus: int
    starts: dict[str, tuple[float, list[str]]] = field(default_factory=dict)
    ends: dict[str, float] = field(default_factory=dict)
    decisions: list[tuple[float, Decision, list[QueuedRun], list[str]]] = field(default_factory=list)

    @property
    def efficiency(self) -> float:
        """Busy GPU-time / available GPU-time over the makespan."""
        return self.busy_gpu_time / (self.n_gpus * self.makespan) if self.makespan else 0.0

    def waits(self, jobs: list[Job]) -> dict[str, float]:
        return {j.run_id: self.starts[j.run_id][0] - j.arrival for j in jobs}


class DoubleBooking(AssertionError):
    pass


def simulate(jobs: list[Job], gpu_ids: list[str], policy: Policy = Policy(), keep_decisions: bool = False,
             max_events: int = 100_000) -> SimResult:
    pending = sorted(jobs, key=lambda j: (j.arrival, j.run_id))
    by_id = {j.run_id: j for j in jobs}
    queue: dict[str, QueuedRun] = {}
    live: dict[str, tuple[list[str], float]] = {}          # run id -> (gpus, start)
    ends: list[tuple[float, str]] = []
    result = SimResult(0.0, 0.0, len(gpu_ids))
    now = 0.0
    i = 0
    for _ in range(max_events):
        while i < len(pending) and pending[i].arrival <= now:
            j = pending[i]
            queue[j.run_id] = QueuedRun(j.run_id, j.gpus, j.priority, queue_pos=i, enqueued_at=j.arrival,
                                        budget_s=j.budget_s)
            i += 1
        while ends and ends[0][0] <= now:
            _, rid = heapq.heappop(ends)
            gpus, start = live.pop(rid)
            result.busy_gpu_time += len(gpus) * (now - start)
            result.ends[rid] = now
        held = [g for gpus, _ in live.values() for g in gpus]
        if len(held) != len(set(held)):
            raise DoubleBooking(f"t={now}: a GPU is held twice: {sorted(held)}")
        free = [g for g in gpu_ids if g not in held]
        active = [ActiveRun(rid, tuple(g), s + by_id[rid].budget_s) for rid, (g, s) in live.items()]
        snapshot = list(queue.values())
        decision = decide(snapshot, free, now, active=active, total_gpus=len(gpu_ids), policy=policy,
                          inventory=gpu_ids)
        if keep_decisions:
            result.decisions.append((now, decision, snapshot, free))
        taken: set[str] = set()
        for rid, gpus in decision.starts:
            if len(gpus) != by_id[rid].gpus or taken & set(gpus) or not set(gpus) <= set(free):
                raise DoubleBooking(f"t={now}: {rid} given {gpus}, free {free}, taken {sorted(taken)}")
            taken |= set(gpus)
            del queue[rid]
            live[rid] = (gpus, now)
            result.starts[rid] = (now, gpus)
            heapq.heappush(ends, (now + by_id[rid].duration, rid))
        nxt = [t for t in ([pending[i].arrival] if i < len(pending) else []) + ([ends[0][0]] if ends else [])]
        if not nxt:
            break
        now = min(nxt)
    else:
        raise RuntimeError("simulation did not finish")
    if queue:
        raise RuntimeError(f"runs never started: {sorted(queue)}")
    result.makespan = max(result.ends.values(), default=0.0)
    return result


def workload(seed: int, n_jobs: int = 60, sizes=(1, 2, 4), weights=(0.6, 0.25, 0.15),
             mean_interarrival: float = 0.0, priorities: tuple[int, ...] = (0,)) -> list[Job]:
    """Seeded mixed workload: budgets of 30-120 min, real durations 50-100% of the budget."""
    rng = random.Random(seed)
    t = 0.0
    jobs = []
    for n in range(n_jobs):
        size = rng.choices(sizes, weights)[0]
        budget = rng.choice([1800.0, 3600.0, 5400.0, 7200.0])
        jobs.append(Job(f"r{n:04d}", size, t, round(budget * rng.uniform(0.5, 1.0), 1), budget,
                        rng.choice(priorities)))
        if mean_interarrival:
            t += rng.expovariate(1 / mean_interarrival)
    return jobs

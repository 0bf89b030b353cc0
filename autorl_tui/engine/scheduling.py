"""The scheduling policy: which queued runs start now, on which GPUs. Pure functions, no I/O.

The engine calls `plan_starts(queue, free_gpus, now, active=...)` every time something changes
(a run ended, a run was queued, the queue was resumed). It computes `free_gpus` from the live
attempts each time; this module keeps no bookkeeping of who holds what, so it cannot drift.

Rules
- Order: higher `priority` first, then lower `queue_pos` (move-to-front = a smaller queue_pos),
  then enqueue time, then run id.
- A GPU is held by one run at a time; a run asking N GPUs gets N explicit device ids, preferring
  ids close together (same NVLink island on most boxes).
- Slots are counted per resource. Runs asking 0 GPUs (a control agent, an API-driven agent that
  trains nothing) take only a CPU slot (`free_cpu_slots`: the engine's concurrency minus its
  active CPU-only runs) and never a GPU's; runs asking GPUs take their GPUs only. Without
  `free_cpu_slots`, every start takes one of `free_slots` (None = unlimited).
- Paused queue (or draining): nothing starts.
- Head-of-line blocking is avoided by backfilling with a reservation (EASY backfilling): the first
  run that does not fit gets a reservation at the earliest time enough GPUs free up, computed from
  the active runs' expected ends (their deadlines). A later run may jump ahead only if it ends
  before that time (by its budget) or uses GPUs the reserved run will not need then. So a big
  request is never starved by a stream of small ones.
- When some active run's end is unknown, the reservation falls back to aging: small runs may
  backfill freely until the blocked run has waited `reserve_after_s`, then its GPUs are held.

Retries: `should_retry` / `next_retry_delay`. Only infrastructure failures are retried (as a new
attempt, with exponential backoff); agent failures never are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence


@dataclass(frozen=True)
class QueuedRun:
    run_id: str
    gpus: int = 0                    # how many GPUs it asks for
    priority: int = 0                # higher runs first
    queue_pos: float = 0.0           # lower runs first within a priority
    enqueued_at: float = 0.0
    budget_s: float | None = None    # upper bound of its duration (budget + finalize margin), if known
    state: str = "queued"            # anything but "queued" is ignored
    not_before: float = 0.0          # an infra retry waiting out its backoff (epoch seconds)


@dataclass(frozen=True)
class ActiveRun:
    run_id: str
    gpus: tuple[str, ...] = ()
    expected_end: float | None = None   # its deadline (+ margin); None if unknown


@dataclass(frozen=True)
class Policy:
    backfill: bool = True            # False: strict FIFO (stop at the first run that does not fit)
    reserve_after_s: float = 900.0   # aging rule used when active runs' ends are unknown


@dataclass
class Decision:
    starts: list[tuple[str, list[str]]] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)    # run id -> why it did not start
    reserved_for: str | None = None                          # the blocked run GPUs are held for
    reserved_at: float | None = None                         # when it is expected to fit


def order_key(run: QueuedRun) -> tuple:
    return (-run.priority, run.queue_pos, run.enqueued_at, run.run_id)


def gpu_sort_key(gid: str) -> tuple:
    return (0, int(gid), "") if gid.isdigit() else (1, 0, gid)


def pick_gpus(free: Sequence[str], n: int, inventory: Sequence[str] | None = None) -> list[str]:
    """n ids from `free`, as close together in the inventory order as possible (lowest on ties)."""
    if n <= 0:
        return []
    if inventory:
        rank = {g: i for i, g in enumerate(inventory)}
    else:
        rank = {g: (int(g) if g.isdigit() else i) for i, g in enumerate(sorted(free, key=gpu_sort_key))}
    avail = sorted(free, key=lambda g: rank.get(g, len(rank)))
    best = None
    for i in range(len(avail) - n + 1):
        window = avail[i:i + n]
        span = rank.get(window[-1], 0) - rank.get(window[0], 0)
        if best is None or span < best[0]:
            best = (span, window)
    return list(best[1]) if best else []


def _fits_at(need: int, free_now: int, active: Iterable[ActiveRun], now: float) -> tuple[float, int] | None:
    """Earliest time `need` GPUs are free, and how many spare GPUs there are then. None if some
    active run's end is unknown (or the need can never be met)."""
    if free_now >= need:
        return now, free_now - need
    holders = [a for a in active if a.gpus]
    if any(a.expected_end is None for a in holders):
        return None
    count = free_now
    for a in sorted(holders, key=lambda a: a.expected_end):
        count += len(a.gpus)
        if count >= need:
            return max(a.expected_end, now), count - need
    return None


def decide(queue: Iterable[QueuedRun], free_gpus: Iterable[str], now: float, *,
           active: Iterable[ActiveRun] = (), total_gpus: int | None = None,
           free_slots: int | None = None, free_cpu_slots: int | None = None, paused: bool = False,
           policy: Policy = Policy(), inventory: Sequence[str] | None = None) -> Decision:
    """The full decision with reasons (for the console's "why is this waiting")."""
    waiting_runs = sorted((r for r in queue if r.state == "queued"), key=order_key)
    decision = Decision()
    if paused:
        decision.waiting = {r.run_id: "queue paused" for r in waiting_runs}
        return decision
    avail = sorted(set(free_gpus), key=gpu_sort_key)
    active = list(active)
    if total_gpus is None:
        total_gpus = len(avail) + sum(len(a.gpus) for a in active)
    slots = math.inf if free_slots is None else free_slots
    cpu_slots = math.inf if free_cpu_slots is None else free_cpu_slots
    reserve: tuple[float, int] | None = None   # (time, spare GPUs then) once someone is blocked
    hold_all = False                           # aging fallback: hold every free GPU for the head
    blocked_fifo = False

    for run in waiting_runs:
        rid = run.run_id
        if run.not_before > now:
            decision.waiting[rid] = f"retry backoff: {run.not_before - now:.0f} s left"
            continue
        if blocked_fifo:
            decision.waiting[rid] = f"behind {decision.reserved_for} (FIFO)"
            continue
        if run.gpus > total_gpus:
            decision.waiting[rid] = f"asks {run.gpus} GPUs, the machine has {total_gpus}"
            continue
        if slots <= 0:
            decision.waiting[rid] = "no free run slot (concurrency limit)"
            continue
        if run.gpus == 0:
            if cpu_slots <= 0:
                decision.waiting[rid] = "no free CPU slot (concurrency limit)"
                continue
            decision.starts.append((rid, []))
            slots -= 1
            cpu_slots -= 1
            continue
        if run.gpus > len(avail):
            if decision.reserved_for is None:
                decision.reserved_for = rid
                if not policy.backfill:
                    blocked_fifo = True
                else:
                    reserve = _fits_at(run.gpus, len(avail), active, now)
                    if reserve is None and now - run.enqueued_at >= policy.reserve_after_s:
                        hold_all = True
                    decision.reserved_at = reserve[0] if reserve else None
            decision.waiting[rid] = f"needs {run.gpus} GPUs, {len(avail)} free"
            continue
        if decision.reserved_for is not None:
            if hold_all:
                decision.waiting[rid] = f"GPUs held for {decision.reserved_for} (waited past the aging limit)"
                continue
            if reserve is not None:
                ends_before = run.budget_s is not None and now + run.budget_s <= reserve[0]
                if not ends_before:
                    if run.gpus > reserve[1]:
                        decision.waiting[rid] = f"would delay {decision.reserved_for}"
                        continue
                    reserve = (reserve[0], reserve[1] - run.gpus)
        chosen = pick_gpus(avail, run.gpus, inventory)
        avail = [g for g in avail if g not in chosen]
        end = now + run.budget_s if run.budget_s is not None else None
        active.append(ActiveRun(rid, tuple(chosen), end))
        decision.starts.append((rid, chosen))
        slots -= 1
    return decision


def plan_starts(queue: Iterable[QueuedRun], free_gpus: Iterable[str], now: float, **kwargs) -> list[tuple[str, list[str]]]:
    """Which runs start now and on which device ids: `[(run_id, ["0", "1"]), ...]`.
    Keyword arguments as for `decide` (active, total_gpus, free_slots, paused, policy, inventory)."""
    return decide(queue, free_gpus, now, **kwargs).starts


def unsatisfiable(gpus_requested: int, total_gpus: int) -> str | None:
    """A clear error for a request this machine can never serve (the engine checks at enqueue)."""
    if gpus_requested < 0:
        return f"gpus_per_run must be >= 0, got {gpus_requested}"
    if gpus_requested > total_gpus:
        have = f"{total_gpus} GPUs" if total_gpus else "no GPU"
        return (f"a run asks {gpus_requested} GPUs but this machine has {have}; lower gpus_per_run "
                "or declare the inventory with --gpus")
    return None


# --- retries -------------------------------------------------------------------------------------

RETRYABLE_SOURCES = frozenset({"infra"})


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3            # attempts in total, the first included
    base_s: float = 10.0
    factor: float = 3.0
    cap_s: float = 600.0


def should_retry(failure_source: str | None, attempt_number: int, policy: RetryPolicy = RetryPolicy()) -> bool:
    """Retry only infrastructure failures (container failed to start, engine lost), as a new
    attempt, while attempts remain. Agent, task, grader, budget and user failures never."""
    return failure_source in RETRYABLE_SOURCES and attempt_number < policy.max_attempts


def next_retry_delay(attempt_number: int, policy: RetryPolicy = RetryPolicy()) -> float:
    """Seconds to wait before the attempt after `attempt_number` (1-based) failed: 10, 30, 90, ...
    capped at `cap_s`."""
    if attempt_number < 1:
        raise ValueError(f"attempt numbers start at 1, got {attempt_number}")
    return float(min(policy.cap_s, policy.base_s * policy.factor ** (attempt_number - 1)))

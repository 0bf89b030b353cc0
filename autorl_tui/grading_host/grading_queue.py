"""The engine's grading queue: how many of this host's gradings run at once, and in which order.

- **Slots**: `slots` gradings at once (the engine's: CPU cores / threads per grading, or one per
  GPU; `AUTORL_GRADING_SLOTS` in the engine's environment sets it).
- **Each run's own gradings in order**: one grading per run at a time, first come first served
  within the run, so a run's submissions are graded (and answered) in the order they came.
- **Fair between runs**: a free slot goes to the next run in turn (round robin over the runs that
  wait), so one agent's burst of 40 submissions never starves a neighbour's single one.
- **Visible**: a grading that has to wait learns its position (1 = next), for `/submit`'s answer
  and the run's log.

Asyncio only (the engine's loop); no thread touches it."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import AsyncIterator, Callable

from autorl_tui import settings



def default_slots(cpus: int, threads_per_grading: int, gpus: int) -> int:
    """AUTORL_GRADING_SLOTS when set; else one per GPU, or as many CPU gradings as fit the cores
    (threads per grading x gradings <= cores)."""
    slots = settings.current().grading_slots
    if slots is not None:
        return slots
    if gpus:
        return gpus
    return max(1, cpus // max(1, threads_per_grading))


@dataclass
class Ticket:
    """One grading's place: `position` when it had to wait (1 = next), `waited_s` once it started."""
    run_id: str
    position: int = 0
    queued_at: float = field(default_factory=time.monotonic)
    waited_s: float = 0.0
    future: asyncio.Future | None = None


class GradingQueue:
    def __init__(self, slots: int):
        self.slots = max(1, int(slots))
        self._running = 0
        self._busy: set[str] = set()                  # runs with a grading running
        self._waiting: dict[str, deque[Ticket]] = {}   # per run, first come first
        self._turns: deque[str] = deque()              # runs in the order they get the next free slot

    def running(self) -> int:
        return self._running

    def waiting(self) -> int:
        return sum(len(q) for q in self._waiting.values())

    def position(self, ticket: Ticket) -> int:
        """How many gradings start before this one, plus one, were nothing else to arrive: those
        ahead of it in its run's queue, and from each other run as many as the turns before
        this one's give it."""
        mine = self._waiting.get(ticket.run_id, deque())
        if ticket not in mine:
            return 0
        index = list(mine).index(ticket)
        turns = list(self._turns)
        my_turn = turns.index(ticket.run_id) if ticket.run_id in turns else len(turns)
        ahead = index
        for rid, queue in self._waiting.items():
            if rid == ticket.run_id:
                continue
            before = rid in turns and turns.index(rid) < my_turn
            ahead += min(len(queue), index + (1 if before else 0))
        return ahead + 1

    @asynccontextmanager
    async def slot(self, run_id: str, on_wait: Callable[[Ticket], None] | None = None) -> AsyncIterator[Ticket]:
        """Hold a grading slot for run_id; on_wait(ticket) is called once when it must wait."""
        ticket = Ticket(run_id, future=asyncio.get_running_loop().create_future())
        self._waiting.setdefault(run_id, deque()).append(ticket)
        if run_id not in self._turns:
            self._turns.append(run_id)
        self._dispatch()
        if not ticket.future.done():
            ticket.position = self.position(ticket)
            if on_wait is not None:
                on_wait(ticket)
        try:
            await asyncio.shield(ticket.future)
        except asyncio.CancelledError:
            if ticket.future.done() and not ticket.future.cancelled():
                self._release(run_id)          # it was given the slot as it was cancelled
            else:
                ticket.future.cancel()
                self._drop(ticket)
            raise
        ticket.waited_s = time.monotonic() - ticket.queued_at
        try:
            yield ticket
        finally:
            self._release(run_id)

    def _drop(self, ticket: Ticket) -> None:
        queue = self._waiting.get(ticket.run_id)
        if queue and ticket in queue:
            queue.remove(ticket)
        self._tidy(ticket.run_id)

    def _tidy(self, run_id: str) -> None:
        if not self._waiting.get(run_id):
            self._waiting.pop(run_id, None)
            if run_id not in self._busy and run_id in self._turns:
                self._turns.remove(run_id)

    def _release(self, run_id: str) -> None:
        self._running -= 1
        self._busy.discard(run_id)
        self._tidy(run_id)
        self._dispatch()

    def _dispatch(self) -> None:
        while self._running < self.slots:
            rid = next((r for r in self._turns if r not in self._busy and self._waiting.get(r)), None)
            if rid is None:
                return
            ticket = self._waiting[rid].popleft()
            if ticket.future.done():      # given up meanwhile
                self._tidy(rid)
                continue
            self._running += 1
            self._busy.add(rid)
            self._turns.remove(rid)
            self._turns.append(rid)       # its next grading waits for every other run's turn
            self._tidy(rid)
            ticket.future.set_result(True)

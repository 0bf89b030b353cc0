"""Typed engine events and the bus that fans them out to subscribers (console, batch display,
socket clients). Publishing never blocks the engine: a subscriber that falls behind is marked
`lagged` and must resynchronise from the store."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence


@dataclass
class EngineEvent:
    run_id: str | None
    ts: float = field(default_factory=time.time, kw_only=True)

    @property
    def type(self) -> str:
        return type(self).__name__

    def to_dict(self) -> dict:
        return {"type": self.type, **asdict(self)}


@dataclass
class RunStateChanged(EngineEvent):
    state: str
    previous: str | None = None
    reason: str | None = None
    failure_source: str | None = None


@dataclass
class RunUpdated(EngineEvent):
    """Some of a run's summary fields changed (scores, deadline, attempt, workspace, ...)."""
    fields: dict[str, Any]


@dataclass
class RunEventAppended(EngineEvent):
    """An agent or harness event line (stdout/stderr line, parsed action, harness message)."""
    kind: str
    message: str
    level: str = "info"
    data: Any = None

    @classmethod
    def lines(cls, run_id: str | None, ts: float, kind: str, level: str,
              messages: list[str]) -> list["RunEventAppended"]:
        """One event per message, all of one kind, level and time (a batch of one stream's agent
        lines): the events the constructor makes, built without its keyword handling per call,
        which is a third of a flood's cost in the engine (benchmarks/bench_ingest.py)."""
        new = object.__new__
        events: list[RunEventAppended] = []
        append = events.append
        for message in messages:
            event = new(cls)
            event.run_id, event.ts, event.kind, event.message, event.level, event.data = (
                run_id, ts, kind, message, level, None)
            append(event)
        return events


@dataclass
class MetricPoint(EngineEvent):
    name: str
    value: float | None
    step: int | None
    source: str
    phase: str | None = None
    session: int | None = None      # training_sessions.id (None for the harness's own dev scores)


@dataclass
class SubmissionUpdated(EngineEvent):
    submission: dict[str, Any]


@dataclass
class ResourceSample(EngineEvent):
    cpu_percent: float | None
    rss_bytes: int | None
    n_procs: int | None
    gpus: list[dict] | None = None
    load: list[float] | None = None     # the host's load average: 1, 5, 15 min


@dataclass
class QueueChanged(EngineEvent):
    paused: bool = False


@dataclass
class ClusterChanged(EngineEvent):
    """The Ray cluster's nodes or which attempt holds which of their GPUs changed
    (executors/ray_view.cluster_state)."""
    cluster: dict[str, Any] | None = None


EVENT_TYPES = {cls.__name__: cls for cls in
               (RunStateChanged, RunUpdated, RunEventAppended, MetricPoint, SubmissionUpdated,
                ResourceSample, QueueChanged, ClusterChanged)}


def event_from_dict(data: dict) -> EngineEvent:
    data = dict(data)
    cls = EVENT_TYPES[data.pop("type")]
    return cls(**data)


class Subscription:
    """One subscriber's events, in order, up to `maxsize` waiting (past that it is `lagged` and
    the rest are counted in `dropped`). Offering costs an append (a deque, not an asyncio.Queue:
    a flood of agent lines is offered in batches); one waiter is woken per batch."""

    def __init__(self, bus: "EventBus", maxsize: int):
        self._bus = bus
        self.maxsize = maxsize
        self._items: deque[EngineEvent] = deque()
        self._waiters: list[asyncio.Future] = []
        self.lagged = False
        self.dropped = 0

    def offer(self, event: EngineEvent) -> None:
        self.offer_many((event,))

    def offer_many(self, events: Sequence[EngineEvent]) -> None:
        room = self.maxsize - len(self._items)
        if len(events) > room:
            self.lagged = True
            self.dropped += len(events) - max(0, room)
            events = events[:max(0, room)]
        if not events:
            return
        self._items.extend(events)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def get(self) -> EngineEvent:
        while not self._items:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                self._waiters.remove(waiter)
        return self._items.popleft()

    def drain(self) -> list[EngineEvent]:
        out = list(self._items)
        self._items.clear()
        return out

    def close(self) -> None:
        self._bus.unsubscribe(self)

    def __aiter__(self):
        return self

    async def __anext__(self) -> EngineEvent:
        return await self.get()


class EventBus:
    def __init__(self) -> None:
        self._subs: list[Subscription] = []

    def subscribe(self, maxsize: int = 100_000) -> Subscription:
        sub = Subscription(self, maxsize)
        self._subs.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        if sub in self._subs:
            self._subs.remove(sub)

    def publish(self, event: EngineEvent) -> None:
        for sub in list(self._subs):
            sub.offer(event)

    def publish_many(self, events: Sequence[EngineEvent]) -> None:
        """Several events at once, in order (a batch of agent lines): one offer per subscriber."""
        for sub in list(self._subs):
            sub.offer_many(events)

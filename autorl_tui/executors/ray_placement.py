"""Which queued Ray runs the engine may hand to the cluster now. Pure: no Ray import.

Our queue decides the order; Ray decides the node. The engine only starts a run when some alive
node has room for its whole request after what our live runs hold (the nodes Ray placed them on)
and what our not-yet-placed runs will take (packed first-fit), so a started run's budget clock
does not tick while it waits for room. Strict order: when the head of the queue does not fit,
nothing behind it starts (a 1-GPU run never starves a 2-GPU run ahead of it)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Request:
    run_id: str
    gpus: int = 0
    cpus: float = 1.0
    memory: int = 0
    resources: tuple[tuple[str, float], ...] = ()

    def needs(self) -> dict[str, float]:
        out = {"GPU": float(self.gpus), "CPU": float(self.cpus), "memory": float(self.memory)}
        out.update(dict(self.resources))
        return {k: v for k, v in out.items() if v}


@dataclass
class Node:
    node_id: str
    total: dict[str, float]
    free: dict[str, float] = field(default_factory=dict)

    def __post_init__(self):
        if not self.free:
            self.free = dict(self.total)

    def fits(self, needs: dict[str, float]) -> bool:
        return all(self.free.get(k, 0.0) + 1e-9 >= v for k, v in needs.items())

    def take(self, needs: dict[str, float]) -> None:
        for k, v in needs.items():
            self.free[k] = self.free.get(k, 0.0) - v


def feasible(request: Request, totals: dict[str, dict[str, float]]) -> bool:
    """Could any node ever hold it (an empty cluster)?"""
    return any(Node(n, t).fits(request.needs()) for n, t in totals.items())


def admit(queue: list[Request], totals: dict[str, dict[str, float]], placed: list[tuple[str, Request]],
          pending: list[Request], chosen: dict[str, str] | None = None) -> list[str]:
    """Run ids to start now, in queue order. `totals`: alive node id -> its resources; `placed`:
    (node id, request) of our runs Ray has placed; `pending`: our started runs not placed yet.
    `chosen`, when given, receives the node each admitted run was packed on (the executor asks Ray
    for it, so that Ray packs as admission did)."""
    nodes = {n: Node(n, dict(t)) for n, t in totals.items()}
    for node_id, req in placed:
        if node_id in nodes:
            nodes[node_id].take(req.needs())
    order = sorted(nodes.values(), key=lambda n: n.node_id)

    def place(req: Request) -> str | None:
        for node in order:
            if node.fits(req.needs()):
                node.take(req.needs())
                return node.node_id
        return None

    for req in pending:
        if place(req) is None:
            return []      # Ray packed differently than we would: wait until the pending ones are placed
    out = []
    for req in queue:
        node_id = place(req)
        if node_id is None:
            break
        out.append(req.run_id)
        if chosen is not None:
            chosen[req.run_id] = node_id
    return out

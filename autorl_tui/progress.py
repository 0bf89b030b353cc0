"""Progress of long preparation steps (building a model, materializing data), reported from
wherever the work happens without passing callbacks through every layer.

`report(step, done, total)` does nothing unless a sink is installed; the prepare worker installs
one that prints JSON lines the engine turns into run events (`preparing: ...`). Reports are
thinned to one per tenth of a step's total so that the log stays readable."""

from __future__ import annotations

from typing import Callable

_sink: Callable[[dict], None] | None = None
_last: dict[str, int] = {}


def set_sink(sink: Callable[[dict], None] | None) -> None:
    global _sink
    _sink = sink
    _last.clear()


def report(step: str, done: int | None = None, total: int | None = None) -> None:
    if _sink is None:
        return
    if done is not None and total:
        tenth = int(10 * done / total)
        if done not in (0, total) and _last.get(step) == tenth:
            return
        _last[step] = tenth
    _sink({"step": step, "done": done, "total": total})


def describe(p: dict) -> str:
    """`pretraining the tiny model: 150/300 (50%)`."""
    done, total = p.get("done"), p.get("total")
    if done is None or not total:
        return p["step"]
    return f"{p['step']}: {done}/{total} ({100 * done / total:.0f}%)"

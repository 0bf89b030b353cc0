"""The normalized agent action: what every stream parser produces, whatever the agent stack.

The engine stores each action as an event (kind='action', message=`action.summary()`,
data=`action.to_dict()`) and sums `usage` actions onto the run (tokens_in, tokens_out, cost_usd).

Kinds and their fields (all optional except `kind`):
  message      text, role                     what the agent said
  reasoning    text                           its visible thinking
  shell        command, exit_code, output     a shell command that finished (exit_code None: unknown)
  file_edit    path, diff, summary            a file the agent wrote or edited
  tool_call    name, input, call_id           any tool call, as requested (a shell or edit call is
                                              followed by its shell/file_edit action once it ran)
  tool_result  name, output, is_error, call_id  the result of a tool call that is not shell/file_edit
  error        text                           an error the agent stack reported
  usage        tokens_in, tokens_out, cache_read, cache_write, cost_usd
               *increments*: summing every usage action of a run gives its totals. tokens_in counts
               every prompt token, cached ones included (cache_read is the cached part of it).
  raw          event                          a JSON event of a type we do not interpret, verbatim
  malformed    line, text                     a line that is not valid JSON (text says why)
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

ACTION_KINDS = ("message", "reasoning", "shell", "file_edit", "tool_call", "tool_result", "error",
                "usage", "raw", "malformed")
OUTPUT_LIMIT = 20_000      # characters of tool output kept on an action (the full log stays on disk)
SUMMARY_LIMIT = 200


def clip(text: Any, limit: int = OUTPUT_LIMIT) -> Any:
    # The slack makes clipping idempotent: a clipped text (limit + marker) is not clipped again.
    if not isinstance(text, str) or len(text) <= limit + 64:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters]"


@dataclass
class Action:
    kind: str
    text: str | None = None
    role: str | None = None
    command: str | None = None
    exit_code: int | None = None
    output: str | None = None
    path: str | None = None
    diff: str | None = None
    summary_text: str | None = None
    name: str | None = None
    input: Any = None
    call_id: str | None = None
    is_error: bool | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cache_read: int | None = None
    cache_write: int | None = None
    cost_usd: float | None = None
    event: Any = None
    line: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in ACTION_KINDS:
            raise ValueError(f"unknown action kind {self.kind!r}; known: {', '.join(ACTION_KINDS)}")
        self.output = clip(self.output)
        self.diff = clip(self.diff)
        self.text = clip(self.text)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        for f in fields(self):
            if f.name in ("kind", "extra"):
                continue
            value = getattr(self, f.name)
            if value is not None:
                out["summary" if f.name == "summary_text" else f.name] = value
        if self.extra:
            out["extra"] = self.extra
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Action":
        """The inverse of to_dict; raises ValueError on an unknown kind or field."""
        data = dict(data)
        kind = data.pop("kind", None)
        if "summary" in data:
            data["summary_text"] = data.pop("summary")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown action field(s) {', '.join(unknown)}")
        return cls(kind=kind, **data)

    def summary(self) -> str:
        """One human-readable line (the event's message)."""
        k = self.kind
        if k in ("message", "reasoning", "error"):
            s = f"{k}: {self.text or ''}"
        elif k == "shell":
            code = "?" if self.exit_code is None else self.exit_code
            s = f"shell [exit {code}]: {self.command or ''}"
        elif k == "file_edit":
            s = f"edit {self.path or '?'}" + (f" ({self.summary_text})" if self.summary_text else "")
        elif k == "tool_call":
            s = f"call {self.name or '?'}: {_short(self.input)}"
        elif k == "tool_result":
            s = f"result {self.name or '?'}{' (error)' if self.is_error else ''}: {self.output or ''}"
        elif k == "usage":
            parts = [f"in={self.tokens_in or 0}", f"out={self.tokens_out or 0}"]
            if self.cache_read:
                parts.append(f"cached={self.cache_read}")
            if self.cost_usd:
                parts.append(f"cost=${self.cost_usd:.4f}")
            s = "usage " + " ".join(parts)
        elif k == "raw":
            ev = self.event if isinstance(self.event, dict) else {}
            t = " ".join(str(ev[k]) for k in ("type", "kind", "subtype") if ev.get(k))
            s = f"raw event {t or type(self.event).__name__}"
        else:
            s = f"malformed line ({self.text}): {self.line or ''}"
        s = " ".join(s.split())
        return s if len(s) <= SUMMARY_LIMIT else s[: SUMMARY_LIMIT - 1] + "…"


def _short(value: Any) -> str:
    if isinstance(value, dict) and len(value) == 1:
        value = next(iter(value.values()))
    return value if isinstance(value, str) else repr(value)


@dataclass
class UsageTotals:
    """Running totals of usage actions (what goes onto the run row)."""
    tokens_in: int = 0
    tokens_out: int = 0
    cache_read: int = 0
    cost_usd: float = 0.0
    seen_cost: bool = False

    def add(self, action: Action) -> bool:
        """Add a usage action; returns True when the totals changed."""
        if action.kind != "usage":
            return False
        self.tokens_in += action.tokens_in or 0
        self.tokens_out += action.tokens_out or 0
        self.cache_read += action.cache_read or 0
        if action.cost_usd is not None:
            self.cost_usd += action.cost_usd
            self.seen_cost = True
        return True

    def run_fields(self) -> dict[str, Any]:
        """Columns of the runs table; cost stays NULL when no stack reported one."""
        return {"tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
                "cost_usd": round(self.cost_usd, 6) if self.seen_cost else None}


class CumulativeUsage:
    """Turns cumulative usage snapshots (some stacks report running totals) into increments."""

    KEYS = ("tokens_in", "tokens_out", "cache_read", "cache_write", "cost_usd")

    def __init__(self) -> None:
        self.seen = {k: 0 for k in self.KEYS}

    def delta(self, **totals: Any) -> Action | None:
        inc: dict[str, Any] = {}
        for k in self.KEYS:
            v = totals.get(k)
            if v is None:
                continue
            d = v - self.seen[k]
            if d > 0:
                inc[k] = round(d, 8) if k == "cost_usd" else int(d)
                self.seen[k] = v
        return Action("usage", **inc) if inc else None

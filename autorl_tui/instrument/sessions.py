"""Training sessions: every metric point belongs to one trainer run, and each (session, metric,
n-th value) is stored once whichever sources report it.

A *source instance* is one stream of log records from one trainer run as one source sees it: a
stdout session of the transformers/TRL log dicts, one `trainer_state.json` file, one TensorBoard
event file, one segment of METRICS_FILE. Its records are numbered per canonical metric name
(the n-th `loss` it reports is ordinal n). An instance joins the most recent session whose first
values agree with its own first values (to the 4 significant digits transformers prints) and that
has no instance of the same source yet; otherwise it opens a new session. So stdout and the
checkpoints' `trainer_state.json` of one `trl sft` are one session, and a second `trl sft` into the
same folder, whose first loss differs, is a second one.

When two sources report the same (session, name, ordinal), the first stored row stays; a source
of higher fidelity (RANK) later replaces its value, fills its step and keeps the earliest time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

# Fidelity order: a point from a higher rank replaces the value of the same point from a lower one.
RANK = {"tensorboard": 4, "trainer_state": 3, "stdout": 2, "metrics_jsonl": 1, "stream": 0}
# Sources of which one session may hold several instances (every checkpoint has its own copy).
MULTI_INSTANCE = {"trainer_state"}
# Values that are the same across two runs of one configuration: they never decide a match alone.
WEAK_NAMES = {"learning_rate", "epoch", "num_tokens", "step", "total_flos"}
KINDS = ("sft", "grpo", "dpo", "ppo", "rm", "unknown")
# Not metrics: the x position and bookkeeping every source repeats (TensorBoard's `train/epoch` too).
NOT_STORED = {"epoch", "step", "total_flos"}


def canonical(name: str) -> str:
    """TRL's vocabulary: TensorBoard's `train/loss` is `loss`, its `eval/loss` is `eval_loss`."""
    if name.startswith("train/"):
        return name[len("train/"):]
    if name.startswith("eval/"):
        return "eval_" + name[len("eval/"):]
    return name


def kind_of(names, hint: str | None = None) -> str:
    """The trainer kind from the names it logs (TRL 1.x), or from a phase/folder hint."""
    names = set(names)
    if names & {"rewards/chosen", "rewards/margins", "logps/chosen"}:
        return "dpo"
    if names & {"objective/kl", "objective/rlhf_reward", "policy/approxkl_avg"}:
        return "ppo"
    if ("reward" in names or "kl" in names) and names & {"reward_std", "completions/mean_length", "frac_reward_zero_std"}:
        return "grpo"
    if names & {"mean_token_accuracy", "num_tokens"}:
        return "sft"
    if names & {"accuracy", "margin"} and "loss" in names:
        return "rm"
    h = (hint or "").lower()
    for k in ("grpo", "dpo", "ppo", "sft"):
        if k in h:
            return k
    return "rm" if "reward_model" in h or h == "rm" else "unknown"


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or f"{a:.4g}" == f"{b:.4g}"


@dataclass
class Session:
    id: int
    kind: str
    started_at: float
    sources: list[str] = field(default_factory=list)    # instance labels: "stdout", "trainer_state:<path>"
    first: dict[str, float | None] = field(default_factory=dict)   # ordinal-0 value per name
    source_kinds: set[str] = field(default_factory=set)
    ended_at: float | None = None


@dataclass
class Instance:
    """One source's view of one trainer run. `counts` numbers the records per name."""
    source: str
    label: str                       # what the session lists: "stdout" or "<source>:<workspace path>"
    session: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    hint: str | None = None

    def to_dict(self) -> dict:
        return {"source": self.source, "label": self.label, "session": self.session, "counts": self.counts,
                "hint": self.hint}

    @classmethod
    def from_dict(cls, d: dict) -> "Instance":
        return cls(d["source"], d["label"], d.get("session"), dict(d.get("counts") or {}), d.get("hint"))


@dataclass
class NewPoint:
    session: int
    name: str
    value: float | None
    step: int | None
    ts: float
    source: str
    phase: str | None = None
    key: tuple = ()


@dataclass
class Upgrade:
    row_id: int
    fields: dict


@dataclass
class Key:
    row_id: int | None
    rank: int
    step: int | None
    ts: float


class SessionTracker:
    """Assigns records to sessions and deduplicates points. `open_session(row) -> id` stores a new
    session row (buffered with the points), `update_session(id, fields)` stages a change;
    `points` and `upgrades` are drained by the caller after each poll."""

    def __init__(self, open_session: Callable[[dict], int], update_session: Callable[[int, dict], None]):
        self._open = open_session
        self._update = update_session
        self.sessions: dict[int, Session] = {}
        self.keys: dict[tuple[int, str, int], Key] = {}
        self.points: list[NewPoint] = []
        self._pending: dict[tuple, NewPoint] = {}     # points not stored yet, by key
        self.upgrades: list[Upgrade] = []

    # ---------------------------------------------------------------- restart
    def restore(self, sessions: list[dict], metric_rows: list[dict]) -> None:
        """Rebuild from the store: session rows and this run's session-tagged metric rows in id order."""
        for r in sessions:
            s = Session(r["id"], r["kind"], r["started_at"], list(r.get("sources") or []), ended_at=r.get("ended_at"))
            s.source_kinds = {x.split(":", 1)[0] for x in s.sources}
            self.sessions[s.id] = s
        counts: dict[tuple[int, str], int] = {}
        for r in metric_rows:
            sid, name = r["session_id"], r["name"]
            k = counts.get((sid, name), 0)
            counts[(sid, name)] = k + 1
            self.keys[(sid, name, k)] = Key(r["id"], RANK.get(r["source"], 0), r["step"], r["ts"])
            if k == 0 and sid in self.sessions:
                self.sessions[sid].first[name] = r["value"]

    # ---------------------------------------------------------------- records
    def record(self, inst: Instance, values: dict[str, float | None], *, ts: float, step: int | None = None,
               phase: str | None = None) -> None:
        values = {c: v for c, v in ((canonical(k), v) for k, v in values.items()) if c not in NOT_STORED}
        if not values:
            return
        if inst.session is None:
            self._bind(inst, values, ts)
        session = self.sessions[inst.session]
        if session.kind == "unknown":
            kind = kind_of(values, inst.hint)
            if kind != "unknown":
                session.kind = kind
                self._update(session.id, {"kind": kind})
        rank = RANK[inst.source]
        for name, value in values.items():
            k = inst.counts.get(name, 0)
            inst.counts[name] = k + 1
            if k == 0:
                session.first.setdefault(name, value)
            key = (session.id, name, k)
            have = self.keys.get(key)
            if have is None:
                self.keys[key] = Key(None, rank, step, ts)
                point = NewPoint(session.id, name, value, step, ts, inst.source, phase, key)
                self.points.append(point)
                self._pending[key] = point
                continue
            fields = {}
            if rank > have.rank:
                fields.update(value=value, source=inst.source)
                have.rank = rank
            if step is not None and (have.step is None or "value" in fields):
                fields["step"] = step
                have.step = step
            if ts < have.ts:
                fields["ts"] = ts
                have.ts = ts
            if fields:
                if have.row_id is None:     # not stored yet: change the pending point itself
                    p = self._pending.get(key)
                    if p is None:
                        continue
                    p.value, p.source = fields.get("value", p.value), fields.get("source", p.source)
                    p.step, p.ts = fields.get("step", p.step), fields.get("ts", p.ts)
                else:
                    self.upgrades.append(Upgrade(have.row_id, fields))

    def close(self, inst: Instance, ts: float) -> None:
        """The trainer printed its summary: its session has ended."""
        if inst.session in self.sessions and self.sessions[inst.session].ended_at is None:
            self.sessions[inst.session].ended_at = ts
            self._update(inst.session, {"ended_at": ts})

    def latest_open(self) -> int | None:
        """The most recent session that has not ended (the trainer a lone summary belongs to)."""
        open_ = [sid for sid, s in self.sessions.items() if s.ended_at is None]
        return max(open_) if open_ else None

    def drain(self) -> tuple[list[NewPoint], list[Upgrade]]:
        out = self.points, self.upgrades
        self.points, self.upgrades, self._pending = [], [], {}
        return out

    def stored(self, key: tuple[int, str, int], row_id: int) -> None:
        self.keys[key].row_id = row_id

    # ---------------------------------------------------------------- binding
    def _bind(self, inst: Instance, values: dict, ts: float) -> None:
        strong = [n for n in values if n not in WEAK_NAMES]
        for sid in sorted(self.sessions, reverse=True):      # the most recent session first
            s = self.sessions[sid]
            if inst.source in s.source_kinds and inst.source not in MULTI_INSTANCE:
                continue
            common = [n for n in values if n in s.first]
            if not common or (strong and not any(n in s.first for n in strong)):
                continue
            if all(_same(values[n], s.first[n]) for n in common):
                inst.session = sid
                break
        if inst.session is None:
            kind = kind_of(values, inst.hint)
            row = {"kind": kind, "started_at": ts, "sources": [inst.label]}
            sid = self._open(row)
            self.sessions[sid] = Session(sid, kind, ts, [inst.label])
            inst.session = sid
        self.join(inst, inst.session)

    def join(self, inst: Instance, sid: int) -> None:
        """Bind a source instance to a known session."""
        inst.session = sid
        s = self.sessions[sid]
        s.source_kinds.add(inst.source)
        if inst.label not in s.sources:
            s.sources.append(inst.label)
            self._update(s.id, {"sources": list(s.sources)})

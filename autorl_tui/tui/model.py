"""What the console knows: run rows and resource samples, kept current by applying engine events
in batches. Pure data (no widgets), so the batching logic is testable on its own."""

from __future__ import annotations

from dataclasses import dataclass, field

from autorl_tui.daemon.client import Disconnected, Lagged
from autorl_tui.engine.events import (ClusterChanged, MetricPoint, QueueChanged, ResourceSample, RunEventAppended,
                                      RunStateChanged, RunUpdated, SubmissionUpdated)
from autorl_tui.tui.formatting import FINISHED_STATES
from autorl_tui.tui.widgets.log_view import LogLine


@dataclass
class Changes:
    """The effect of one batch of events."""
    runs: set[str] = field(default_factory=set)              # rows whose fields changed
    unknown_runs: set[str] = field(default_factory=set)      # events for runs not in our snapshot
    states: list[RunStateChanged] = field(default_factory=list)
    beat_baseline: list[str] = field(default_factory=list)
    trust_flags: list[RunEventAppended] = field(default_factory=list)   # trust findings that are flags (toasts)
    log: dict[str, list[LogLine]] = field(default_factory=dict)
    metrics: dict[str, list[MetricPoint]] = field(default_factory=dict)
    submissions: dict[str, list[dict]] = field(default_factory=dict)
    resources: dict[str, ResourceSample] = field(default_factory=dict)
    queue: bool = False
    cluster: bool = False                                    # the Ray cluster's nodes or holdings
    resync: bool = False
    dropped: int = 0                                         # events the engine dropped for us
    disconnected: str | None = None
    n_events: int = 0

    def __bool__(self) -> bool:
        return bool(self.n_events or self.resync or self.disconnected)

    def merge(self, later: "Changes") -> "Changes":
        """These changes followed by `later`'s (the console applies a tick's events in slices)."""
        self.runs |= later.runs
        self.unknown_runs |= later.unknown_runs
        self.states += later.states
        self.beat_baseline += later.beat_baseline
        self.trust_flags += later.trust_flags
        for mine, theirs in ((self.log, later.log), (self.metrics, later.metrics),
                             (self.submissions, later.submissions)):
            for rid, items in theirs.items():
                mine.setdefault(rid, []).extend(items)
        self.resources.update(later.resources)
        self.queue |= later.queue
        self.cluster |= later.cluster
        self.resync |= later.resync
        self.dropped += later.dropped
        self.disconnected = self.disconnected or later.disconnected
        self.n_events += later.n_events
        return self


def beats_baseline(run: dict) -> bool:
    base, best = run.get("baseline_dev_score"), run.get("best_dev_score")
    return base is not None and best is not None and best > base


def note_liveness(run: dict, ev) -> None:
    """What the Runs table's liveness column shows: when the run last said anything (resource
    samples are the engine's, not the run's, so they do not count), and the step it is at —
    the latest training step, or the latest preparation/baseline progress line."""
    run["last_event_at"] = max(ev.ts, run.get("last_event_at") or 0)
    if isinstance(ev, MetricPoint) and ev.step is not None:
        run["step"] = max(ev.step, run.get("step") or 0)
    elif isinstance(ev, RunEventAppended) and run.get("state") in ("preparing", "baseline") \
            and ev.kind in ("harness", "preparing"):
        run["progress"] = ev.message


TREND_POINTS = 16     # dev scores kept per run (the snapshot sends as many: daemon/run_summaries.py)


def note_dev_score(run: dict, sub: dict) -> bool:
    """A graded submission's dev score joins the run's trend (the Runs table's sparkline): the
    last TREND_POINTS scores by submission number. Returns whether the trend changed."""
    seq, score = sub.get("seq"), sub.get("score")
    if seq is None or score is None:
        return False
    points = {s: v for s, v in run.get("dev_scores") or ()}
    if points.get(seq) == score:
        return False
    points[seq] = score
    run["dev_scores"] = [[s, points[s]] for s in sorted(points)][-TREND_POINTS:]
    return True


class ConsoleModel:
    def __init__(self):
        self.runs: dict[str, dict] = {}
        self.queue_paused = False
        self.gpus: dict = {"devices": [], "holders": {}, "cpu_slots": None}
        self.gpu_stats: dict[str, dict] = {}
        self.resources: dict[str, ResourceSample] = {}
        self.engine: dict = {}
        self._announced_beat: set[str] = set()

    def load_snapshot(self, snap: dict) -> None:
        self.runs = {}
        self.merge_snapshot(snap)

    def known_digests(self) -> dict[str, tuple[float, str]]:
        """What a re-attaching console holds: each run's place in the snapshot's order (created_at)
        and the server's digest of its row as it sent it."""
        return {rid: (r.get("created_at") or 0.0, r["digest"]) for rid, r in self.runs.items() if r.get("digest")}

    def merge_snapshot(self, page: dict) -> list[str]:
        """A snapshot page's runs replace ours (the page leaves out runs we hold unchanged).
        Returns the ids it brought."""
        for r in page.get("runs", []):
            self.runs[r["id"]] = r
            if beats_baseline(r):
                self._announced_beat.add(r["id"])     # known on attach: not news
        self.queue_paused = bool(page.get("queue_paused"))
        self.gpus = page.get("gpus") or self.gpus
        self.engine = page.get("engine") or {}
        return [r["id"] for r in page.get("runs", [])]

    def apply(self, events: list) -> Changes:
        ch = Changes()
        for ev in events:
            ch.n_events += 1
            if type(ev) is RunEventAppended and ev.kind == "stdout":     # most of a flood: the short way
                rid = ev.run_id
                ch.log.setdefault(rid, []).append(LogLine(ev.ts, "stdout", ev.level, ev.message,
                                                          getattr(ev, "recv_seq", 0)))
                run = self.runs.get(rid) if rid else None
                if run is not None and ev.ts:
                    if ev.ts > (run.get("last_event_at") or 0):
                        run["last_event_at"] = ev.ts
                    ch.runs.add(rid)
                continue
            if isinstance(ev, Lagged):
                ch.resync = True
                ch.dropped += ev.dropped
                continue
            if isinstance(ev, Disconnected):
                ch.disconnected = ev.reason
                continue
            rid = ev.run_id
            run = self.runs.get(rid) if rid else None
            if run is not None and ev.ts and not isinstance(ev, ResourceSample):
                note_liveness(run, ev)
                ch.runs.add(rid)
            if isinstance(ev, RunEventAppended):
                ch.log.setdefault(rid, []).append(LogLine(ev.ts, ev.kind, ev.level, ev.message,
                                                                  getattr(ev, "recv_seq", 0)))
                if ev.kind == "trust" and ev.level in ("warning", "error"):
                    ch.trust_flags.append(ev)
            elif isinstance(ev, MetricPoint):
                ch.metrics.setdefault(rid, []).append(ev)
            elif isinstance(ev, ResourceSample):
                ch.resources[rid] = ev
                self.resources[rid] = ev
                for gpu in ev.gpus or []:
                    self.gpu_stats[str(gpu.get("index"))] = {**gpu, "run_id": rid}
            elif isinstance(ev, QueueChanged):
                self.queue_paused = ev.paused
                ch.queue = True
            elif isinstance(ev, ClusterChanged):
                self.gpus = {**self.gpus, "cluster": ev.cluster}
                ch.cluster = True
            elif isinstance(ev, RunStateChanged):
                ch.states.append(ev)
                if run is None:
                    ch.unknown_runs.add(rid)
                    continue
                if run.get("state") in ("running", "paused") and ev.state not in ("running", "paused"):
                    run["agent_ended_at"] = ev.ts       # what follows is grading/finalizing, not the agent
                run["state"] = ev.state
                if ev.failure_source is not None:
                    run["failure_source"] = ev.failure_source
                if ev.reason is not None and ev.state in FINISHED_STATES:
                    run["end_reason"] = ev.reason
                if ev.state == "running" and not run.get("started_at"):
                    run["started_at"] = ev.ts
                if ev.state in FINISHED_STATES and not run.get("ended_at"):
                    run["ended_at"] = ev.ts
                ch.runs.add(rid)
            elif isinstance(ev, RunUpdated):
                if run is None:
                    ch.unknown_runs.add(rid)
                    continue
                run.update(ev.fields)
                ch.runs.add(rid)
            elif isinstance(ev, SubmissionUpdated):
                ch.submissions.setdefault(rid, []).append(ev.submission)
                if run is not None and note_dev_score(run, ev.submission):
                    ch.runs.add(rid)
        for rid in ch.runs:
            run = self.runs[rid]
            if rid not in self._announced_beat and beats_baseline(run):
                self._announced_beat.add(rid)
                ch.beat_baseline.append(rid)
        return ch

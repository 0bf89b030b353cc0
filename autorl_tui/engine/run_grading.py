"""Grading for one run: the grader requests it makes (grading_host/grading_client.py runs them), their time
limits and progress lines, the samples they return, and the run's baselines (the base model on dev
and on the held-out test split, cached per task, model, protocol and grader version)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from autorl_tui.durations import format_duration
from autorl_tui.grading_host.grading_client import GradingOutcome, prestart_warm, run_grader
from autorl_tui.grading_host.grading_placement import grading_devices, place
from autorl_tui.engine.run_outcomes import RunFailure
from autorl_tui.grading import GRADER_VERSION

if TYPE_CHECKING:
    from autorl_tui.catalog.tasks import TaskCard
    from autorl_tui.grading.placement import Placement
    from autorl_tui.engine.run_host import RunHost
    from autorl_tui.engine.run_journal import RunJournal
    from autorl_tui.store.run_spec import RunSpec

# Grader bounds (docs/grading.md, "Grader bounds").
GRADING_TIMEOUT_S = 3600.0    # any one grading process, at most
GRADING_FLOOR_S = 120.0       # a submission's grading gets at least this...
GRADING_GRACE_S = 60.0        # ...or the run's remaining budget plus this, whichever is longer
TEMPLATE_LIMITS = {"per_prompt_s": 5.0, "total_s": 60.0}   # rendering a submitted chat template


def model_fingerprint(path: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file():
            st = p.stat()
            h.update(f"{p.relative_to(path)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:12]


class RunGrading:
    def __init__(self, journal: "RunJournal", host: "RunHost", spec: "RunSpec", gpus: list[str]):
        self.journal = journal
        self.host = host
        self.spec = spec
        self.gpus = gpus
        self.card: "TaskCard | None" = None
        self.split_paths: dict[str, str] = {}
        self.baseline_dev: float | None = journal.run.baseline_dev_score
        self.baseline_grading_s: float | None = None   # the base model's dev grading time: sets the floor
        self._progress_t = 0.0      # monotonic time of the last grading progress line
        # executor ray: where the run's agent was placed and whether it is alive (set by the supervisor)
        self.agent_where: Callable[[], dict | None] = lambda: None

    def prepared(self, card: "TaskCard", split_paths: dict[str, str]) -> None:
        """The task and its materialized splits, once the run has them."""
        self.card, self.split_paths = card, split_paths

    def _scorer_options(self, card: "TaskCard") -> dict:
        options = dict(card.scorer_options)
        if card.scorer == "judge":
            # In a folder of its own: the sandboxed grader writes there and nowhere else in the cache.
            options.setdefault("cache_path", str(self.host.home.cache / "judge" / "judge.sqlite"))
        return options

    def work_dir(self, name: str) -> Path:
        """Where one of the run's gradings works: in the engine's folder of gradings, whose one
        warm server every run shares."""
        return self.host.home.gradings / self.journal.run_id / name

    def prestart(self, card: "TaskCard") -> None:
        """Start the run's warm grader now (docs/grading.md), so that its start overlaps building
        the base model and materializing the splits instead of delaying the first baseline."""
        request = {"task": card.to_dict(), "scorer": card.scorer, "scorer_options": self._scorer_options(card)}
        try:
            # On the GPUs its gradings will use: a `pool` placement's, not the run's own.
            gpus = grading_devices(dict(self.spec.options), self.gpus)
            prestart_warm(request, self.work_dir("baseline-dev"), gpus=gpus, threads=self.host.grader_threads,
                          grading_root=self.host.home.gradings)
        except OSError as exc:       # an optimisation: the first grading starts its server then
            self.journal.log("harness", f"warm grader not started ahead: {exc}", level="warning")

    def placement(self, model_path: Path, split: str, gpus: list[str] | None = None) -> Placement:
        """Where and how this grading runs (grading/placement.py): the plan's `grading:` choice, on
        the run's GPUs (or those the agent named in its submit), sized from their free memory now."""
        return place(self.spec.options, self.gpus if gpus is None else gpus, model_path,
                     self.card.protocol, _count_items(self.split_paths.get(split)))

    def request(self, model_path: Path, split: str, placement: Placement | None = None) -> dict:
        options = self._scorer_options(self.card)
        # Graders get only the environment they need: the judge's key variable (named in the card).
        pass_env = list(options.get("pass_env", [])) + ["AUTORL_JUDGE_URL"]
        if options.get("api_key_env"):
            pass_env.append(options["api_key_env"])
        return {"task": self.card.to_dict(), "split": split, "split_path": self.split_paths[split],
                "model_path": str(model_path), "protocol": self.card.protocol.to_dict(), "scorer": self.card.scorer,
                "scorer_options": options,
                "backend": placement.backend if placement else "transformers",
                "device": placement.device if placement else ("cuda" if self.gpus else "cpu"),
                "placement": placement.to_dict() if placement else None, "threads": self.host.grader_threads,
                "seed": self.card.protocol.seed, "limit": None, "pass_env": pass_env,
                "template_limits": TEMPLATE_LIMITS}

    def timeout(self, for_submission: bool) -> float:
        """The grading process's wall-clock limit. A submission's grading ends with the run's budget
        plus a grace, but never gets less than the floor (a submission received just before the
        deadline is still graded): the floor is GRADING_FLOOR_S, or 3x the baseline's dev grading
        time when that is longer (a slow task's honest model must fit)."""
        limit = GRADING_TIMEOUT_S
        deadline = self.journal.deadline
        if not for_submission or deadline is None:
            return limit
        floor = max(GRADING_FLOOR_S, 3 * (self.baseline_grading_s or 0.0))
        return min(limit, max(floor, deadline - time.time() + GRADING_GRACE_S))

    def _progress(self, what: str, category: str, split: str):
        """The grader's progress as log lines: `WHAT: grading 120/200 samples`."""
        def report(done: int, total: int, stage: str) -> None:
            self._progress_t = time.monotonic()
            unit = "episodes" if stage == "episodes" else "samples"
            verb = "scoring" if stage == "scoring" else "grading"
            self.journal.log(category, f"{what}: {verb} {done}/{total} {unit}",
                             data={"phase": "grading", "split": split,
                                   "progress": {"done": done, "total": total, "stage": stage}})
        return report

    async def grade(self, model_path: Path, split: str, work_dir: Path, for_submission: bool = False,
                    gpus: list[str] | None = None, progress_what: str | None = None) -> GradingOutcome:
        """progress_what: the baseline's label; its progress lines are then harness events."""
        log = self.journal.log
        # A cluster run's gradings go to its cluster, its baselines too (still cached per task and
        # model for every run); they take none of this host's grading slots.
        executor = self.host.executor(self.spec.executor_name)
        on_cluster = executor.grades_remotely
        what = progress_what or f"grading {model_path.name} on {split}"

        def waits(ticket) -> None:
            log("grading", f"{what}: waiting for a grading slot, position {ticket.position} in the queue "
                           f"({self.host.grading_queue.running()} grading(s) running)",
                data={"split": split, "phase": "queued", "position": ticket.position})
        slot = (contextlib.nullcontext(None) if on_cluster
                else self.host.grading_queue.slot(self.journal.run_id, on_wait=waits))
        async with slot as ticket:
            timeout = self.timeout(for_submission)
            log("grading", f"grading {model_path.name} on {split}",
                data={"split": split, "phase": "start", "timeout_s": round(timeout, 1)})
            on_progress = self._progress(what, "harness" if progress_what else "grading", split)
            if on_cluster:
                outcome = await executor.grade_remotely(self.request(model_path, split), work_dir,
                                                        agent_where=self.agent_where(), run_id=self.journal.run_id,
                                                        gpus=int(self.journal.run.gpus_requested or 0),
                                                        threads=self.host.grader_threads, timeout_s=timeout,
                                                        on_progress=on_progress,
                                                        choice=self.spec.option("grading"))
            else:
                placement = self.placement(model_path, split, gpus)
                outcome = await run_grader(self.request(model_path, split, placement), work_dir,
                                           gpus=list(placement.devices),
                                           threads=self.host.grader_threads, timeout_s=timeout, on_progress=on_progress,
                                           grading_root=self.host.home.gradings)
                outcome.placement = {**placement.to_dict(), **(outcome.placement or {})}
            if ticket is not None:
                outcome.queue = {"position": ticket.position, "waited_s": round(ticket.waited_s, 3)}
            where = {"where": outcome.where} if outcome.where else {}
            # phases: where the grading's wall time went, span by span (docs/grading.md)
            where.update({k: getattr(outcome, k) for k in ("queue", "server", "placement", "phases")
                          if getattr(outcome, k)})
            if progress_what:
                where["baseline"] = True
            if outcome.ok:
                log("grading", f"graded {model_path.name} on {split}: {outcome.score:.2f}",
                    data={"split": split, "phase": "end", "score": outcome.score, "timings": outcome.timings, **where})
            else:
                log("grading", f"grading {model_path.name} on {split} failed: {outcome.error}", level="error",
                    data={"split": split, "phase": "end", "error": outcome.error, "kind": outcome.error_kind,
                          **where})
            return outcome

    def store_samples(self, samples: list[dict], split: str, *, submission_id: int | None = None,
                      baseline_id: int | None = None) -> None:
        rows = [{"run_id": self.journal.run_id if baseline_id is None else None, "submission_id": submission_id,
                 "baseline_id": baseline_id, "split": split, "sample_id": str(s.get("sample_id")),
                 "prompt": s.get("prompt"), "output": s.get("output"), "extracted": s.get("extracted"),
                 "expected": s.get("expected"),
                 "correct": None if s.get("correct") is None else int(bool(s.get("correct"))),
                 "score": s.get("score"), "tokens": s.get("tokens"), "failure_kind": s.get("failure_kind"),
                 "error": s.get("error"), "data": s.get("data")} for s in samples]
        self.journal.store.add_samples(rows)

    # ------------------------------------------------------------------ baselines
    def _protocol_hash(self) -> str:
        """The card's protocol hash in this home (a secret partition's commitment included)."""
        return self.card.protocol_hash(self.host.home.cache / "tasks")

    def grading_kind(self, model_path: Path, split: str) -> str:
        """"BACKEND/DEVICE" this run's grading of `split` will use (part of a baseline's cache key:
        a vLLM score on a GPU is not the CPU transformers one). A cluster grading's node decides
        (ray_grading.node_placement): its key is the plan's backend on the run's GPUs or none."""
        if self.host.executor(self.spec.executor_name).grades_remotely:
            gpus = int(self.journal.run.gpus_requested or 0)
            backend = (self.spec.option("grading") or {}).get("backend") or "auto"
            return f"cluster:{backend}/{'cuda' if gpus else 'cpu'}"
        placement = self.placement(model_path, split)
        return f"{placement.backend}/{placement.device}"

    async def baselines(self, model_path: Path, model_name: str, check_cancel: Callable[[], None]) -> None:
        """The base model on dev and test, recorded on the run (cached when already computed, by
        the same backend on the same kind of device)."""
        model_key = f"{model_name}@{model_fingerprint(model_path)}"
        scores = {}
        for split in ("dev", "test"):
            check_cancel()
            kind = await asyncio.to_thread(self.grading_kind, model_path, split)
            # One computation per baseline key even when several runs of a task start together.
            async with self.host.baseline_lock((self.card.id, model_key, self._protocol_hash(), split, kind)):
                scores[split] = await self._baseline(model_path, split, model_key, kind)
        self.baseline_dev = scores["dev"]
        self.journal.update_run(baseline_dev_score=scores["dev"], baseline_score=scores["test"])

    async def _heartbeat(self, what: str, every_s: float = 30.0) -> None:
        """Between the grader's progress lines (loading the model, a slow batch): say it is still
        at work, with the time so far."""
        t0 = time.monotonic()
        while True:
            await asyncio.sleep(every_s)
            if time.monotonic() - self._progress_t < every_s:
                continue
            self.journal.log("harness", f"{what}: still grading, {format_duration(time.monotonic() - t0)} so far",
                             data={"phase": "baseline", "elapsed_s": round(time.monotonic() - t0)})

    async def _baseline(self, model_path: Path, split: str, model_key: str, kind: str) -> float:
        store, log = self.journal.store, self.journal.log
        cached = store.cached_baseline(self.card.id, model_key, self._protocol_hash(), GRADER_VERSION, split, kind)
        if cached:
            if split == "dev":
                self.baseline_grading_s = ((cached.get("metrics") or {}).get("timings") or {}).get("total_s")
            log("harness", f"baseline on {split}: {cached['score']:.2f} (cached, {kind})",
                data={"split": split, "baseline_id": cached["id"], "cached": True, "grading": kind})
            return cached["score"]
        work = self.work_dir(f"baseline-{split}")
        n = _count_items(self.split_paths.get(split))
        what = f"baseline on {split}: grading the base model on {n if n is not None else 'the'} sample(s)"
        log("harness", what, data={"phase": "baseline", "split": split, "progress": {"step": what, "total": n}})
        heartbeat = asyncio.ensure_future(self._heartbeat(what))
        try:
            outcome = await self.grade(model_path, split, work, progress_what=f"baseline on {split}")
        finally:
            heartbeat.cancel()
        if not outcome.ok:
            raise RunFailure("grader", f"baseline grading on {split} failed: {outcome.error}")
        if split == "dev":
            self.baseline_grading_s = outcome.wall_s
        if outcome.grader_version and outcome.grader_version != GRADER_VERSION:
            log("harness", f"grader reports version {outcome.grader_version}, engine expects {GRADER_VERSION}",
                level="warning")
        used = outcome.placement or {}       # what it ran on here (a vLLM that could not start: transformers)
        if outcome.where is None and used.get("backend") and used.get("device"):
            kind = f"{used['backend']}/{used['device']}"
        baseline_id = store.add_baseline({
            "task": self.card.id, "model": model_key, "protocol_hash": self._protocol_hash(),
            "grader_version": GRADER_VERSION, "split": split, "score": outcome.score, "grading": kind,
            "metrics": {**outcome.metrics, "timings": outcome.timings}, "created_at": time.time()})
        self.store_samples(outcome.samples, split, baseline_id=baseline_id)
        log("harness", f"baseline on {split}: {outcome.score:.2f}", data={"split": split, "baseline_id": baseline_id})
        return outcome.score


def _count_items(path: str | None) -> int | None:
    """Items in a materialized .jsonl split (None for folder splits)."""
    if not path or not str(path).endswith(".jsonl"):
        return None
    try:
        with open(path, "rb") as fh:
            return sum(1 for line in fh if line.strip())
    except OSError:
        return None

"""A run's submission desk: takes a submitted model folder in (checks, cap, snapshot, code
revision), grades it on dev or joins the grading of identical content, records the result and
answers. It also answers the agent's time, submissions and health questions.

Refusals are typed domain errors (`SubmissionRefused` and its kinds here, `SubmissionRejected` from
grading_host/submissions.py); only the HTTP edge, engine/run_api.py, turns them into statuses."""

from __future__ import annotations

import asyncio
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from autorl_tui.engine import autorl_bench_api as abapi
from autorl_tui.engine import events as ev
from autorl_tui.engine import trust_provenance
from autorl_tui.engine.run_revisions import revision_tracker, snapshot_revision
from autorl_tui.grading_host.submissions import (SubmissionRejected, check_model_path_text, folder_bytes, hash_snapshot,
                                           hash_snapshot_folder, snapshot_cap, take_submission)
from autorl_tui.engine.workspace import write_run_meta

if TYPE_CHECKING:
    from autorl_tui.catalog.agents import AgentSpec
    from autorl_tui.catalog.tasks import TaskCard
    from autorl_tui.grading_host.grading_client import GradingOutcome
    from autorl_tui.engine.run_grading import RunGrading
    from autorl_tui.engine.run_journal import RunJournal
    from autorl_tui.engine.workspace import Workspace
    from autorl_tui.home import Home
    from autorl_tui.store.records import SubmissionRecord


# Intake refusals AutoRL-Bench's server does not refuse: its evaluator fails on such a folder and
# the submission becomes a scored 0.0 entry. In its compat mode they are answered and counted so.
UNUSABLE = {"missing", "not_a_folder", "empty", "lora_only", "missing_config", "missing_weights", "missing_tokenizer"}

# A fresh snapshot with at least this many bytes to hash is queued for grading before it is hashed,
# and hashed beside the grading (a 15 GB checkpoint's hashing would otherwise delay its grading by
# seconds to minutes); a smaller one is hashed in its intake (well under a second).
EARLY_GRADING_BYTES = 256 << 20


def _pass(turn: asyncio.Future) -> None:
    if not turn.done():
        turn.set_result(None)


class SubmissionRefused(Exception):
    """A submission the desk does not take, or took and could not grade. `code` says why in one
    word; `extra` holds fields for the answer."""

    def __init__(self, message: str, code: str, extra: dict | None = None):
        super().__init__(message)
        self.code, self.extra = code, extra or {}


class SubmissionsClosed(SubmissionRefused):
    """The run is not taking submissions (not running, or past its deadline)."""


class SubmissionLimit(SubmissionRefused):
    """The task's submission cap: too many, or too soon after the last one."""


class GpuRequestRefused(SubmissionRefused):
    """The submission asked for GPUs this run does not hold."""


class GradingFailed(SubmissionRefused):
    """Taken in, but its grading failed; `extra` is the rest of the answer (our own agents' contract:
    AutoRL-Bench agents get that answer as a success with score 0.0 instead)."""


class SubmissionDesk:
    def __init__(self, journal: "RunJournal", grading: "RunGrading", home: "Home", *, workspace: "Workspace",
                 card: "TaskCard", agent: "AgentSpec", gpus: list[str]):
        self.journal = journal
        self.store = journal.store
        self.grading = grading
        self.home = home
        self.workspace = workspace
        self.card = card
        self.agent = agent
        self.gpus = gpus
        self._lock = asyncio.Lock()
        self._inflight: set[asyncio.Task] = set()
        self._grading_by_hash: dict[str, asyncio.Task] = {}   # content being graded → its grading
        self._base_model_bytes: int | None = None
        self._queue_info: dict[int, dict] = {}     # submission id → its place in the engine's grading queue
        self._turn: asyncio.Future | None = None   # passed on by the last submission received (_take_in)

    @property
    def run_id(self) -> str:
        return self.journal.run_id

    async def wait_gradings(self) -> None:
        """Until every grading under way has ended (recorded as scored or error)."""
        if self._inflight:
            await asyncio.gather(*list(self._inflight), return_exceptions=True)

    # ------------------------------------------------------------------ intake
    def _check_cap(self, now: float) -> None:
        cap = self.card.submission_cap
        times = self.store.capped_submission_times(self.run_id)
        if cap.get("max_count") and len(times) >= int(cap["max_count"]):
            raise SubmissionLimit(f"submission cap reached: at most {cap['max_count']} submissions in this run", "cap")
        if cap.get("min_interval_s") and times and now - times[-1] < float(cap["min_interval_s"]):
            wait = float(cap["min_interval_s"]) - (now - times[-1])
            raise SubmissionLimit(f"one submission every {cap['min_interval_s']}s: try again in {wait:.0f}s", "rate",
                                  {"retry_after_s": round(wait, 1)})

    async def submit(self, model_path, gpu=None) -> dict:
        """Take a submission in, grade it (or join the grading of identical content) and answer.

        Nothing is recorded for a request that cannot name a folder (checked first). Once its row is
        written, every outcome moves it to a terminal state: `rejected` when intake refuses it or
        fails (not counted against the cap), `scored`/`error` once graded, `duplicate` when its
        content was already graded (or is being graded: it then waits for that result)."""
        journal, log = self.journal, self.journal.log
        now = time.time()
        if journal.state not in ("running", "paused") or journal.deadline is None:
            raise SubmissionsClosed(f"the run is {journal.state}: submissions are closed", "closed")
        if now > journal.deadline:
            raise SubmissionsClosed("the budget is exhausted: submissions after the deadline are not graded", "deadline")
        check_model_path_text(model_path)
        try:
            grading_gpus = abapi.choose_gpus(gpu, list(self.gpus))
        except abapi.GpuRefused as exc:
            raise GpuRequestRefused(str(exc), exc.code, {"available_gpus": exc.available}) from None
        async with self._lock:      # the cap, the sequence number and the turn; the intake runs outside it
            self._check_cap(now)
            sub_id, seq = self.store.add_submission(self.run_id, journal.attempt, model_path[:1000], now)
            log("submission", f"submission {seq} received: {model_path[:300]}",
                data={"submission_id": sub_id, "seq": seq})
            after, turn = self._turn, asyncio.get_running_loop().create_future()
            self._turn = turn
        try:
            taken = await self._take_in(model_path, sub_id, seq, grading_gpus, after, turn)
        finally:
            _pass(turn)
        if isinstance(taken, dict):         # answered already: a duplicate, or a folder AutoRL-Bench scores 0
            return taken
        task, first = taken
        row = await asyncio.shield(task)
        if first is not None:          # identical content submitted while it was being graded: one grading
            if row.status == "scored":
                return self._mark_duplicate(sub_id, seq, row)
            row = journal.set_submission(sub_id, status="error", duplicate_of=row.id, graded_at=time.time(),
                                         error=f"same content as submission {row.seq}, which could not be "
                                               f"graded: {row.error}")
        if row.status == "error":
            return self._failed_answer(row, seq)
        return self._response(row)

    async def _take_in(self, model_path: str, sub_id: int, seq: int, grading_gpus: list[str],
                       after: asyncio.Future | None, turn: asyncio.Future) -> "dict | tuple[asyncio.Task, Any]":
        """Snapshot the folder, then, in the run's order, check it against earlier content and queue
        its grading: (the grading, the identical grading it joined or None), or the answer already.

        Turns: the run's submissions register (duplicate checks, the grading queue) in the order they
        came, each after the one before it has (`after`, its `turn`), so that of two identical
        folders sent at once the first is graded and the second is its duplicate. A folder of
        EARLY_GRADING_BYTES or more passes its turn on as soon as its size is known: its copy holds
        up no later submission of the run, which may then be graded before it."""
        journal, log = self.journal, self.journal.log
        loop = asyncio.get_running_loop()

        def measured(nbytes: int) -> None:        # in the intake's thread
            if nbytes >= EARLY_GRADING_BYTES:
                loop.call_soon_threadsafe(_pass, turn)
        try:
            snap, rev_id = await self._intake(model_path, seq, measured)
            if after is not None:
                await asyncio.shield(after)
        except SubmissionRejected as exc:
            if exc.code in UNUSABLE and getattr(self.agent, "grading_api", "autorl-tui") == "autorl-bench":
                # AutoRL-Bench grades such a folder: its evaluator fails, a 0.0 entry is counted
                row = journal.set_submission(sub_id, status="error", error=str(exc), graded_at=time.time())
                log("submission", f"submission {seq} could not be graded: {exc} (an entry with score 0.0, as "
                                  f"AutoRL-Bench counts it)", level="warning",
                    data={"submission_id": sub_id, "code": exc.code})
                self.mirror_scores()
                return self._failed_answer(row, seq)
            journal.set_submission(sub_id, status="rejected", error=str(exc))
            log("submission", f"submission {seq} rejected: {exc}", level="warning",
                data={"submission_id": sub_id, "code": exc.code})
            raise
        except BaseException as exc:   # a harness fault (or shutdown): never a row left in `received`
            self._intake_failed(sub_id, seq, exc)
            raise
        journal.set_submission(sub_id, snapshot_path=str(snap.path), content_hash=snap.content_hash,
                               revision_id=rev_id, status="grading")
        log("submission", f"submission {seq} snapshot taken: {snap.n_files} files, {snap.total_bytes} bytes",
            data={"submission_id": sub_id, "seq": seq, "phase": "snapshot", "hashed": snap.content_hash is not None})
        early = None
        if snap.content_hash is None:
            # A big fresh content: graded from the harness-owned copy while the copy is hashed; the
            # duplicate checks below settle once the hash is known (a duplicate's grading is stopped).
            early = asyncio.create_task(self._grade_only(snap.path, seq, grading_gpus))
            self._inflight.add(early)
            early.add_done_callback(self._inflight.discard)
            try:
                await asyncio.to_thread(hash_snapshot, snap)
            except BaseException as exc:
                early.cancel()
                self._intake_failed(sub_id, seq, exc)
                raise
            journal.set_submission(sub_id, content_hash=snap.content_hash)
            log("submission", f"submission {seq} hashed beside its grading: {snap.content_hash}",
                data={"submission_id": sub_id, "seq": seq, "phase": "hashed"})
        content_hash = str(snap.content_hash)
        earlier = self.store.scored_with_content(self.run_id, content_hash, sub_id)
        if earlier:
            self._stop_early(early, seq, earlier.seq)
            return self._mark_duplicate(sub_id, seq, earlier)
        trust_provenance.check_in_background(self, sub_id, seq, snap.path)
        task = self._grading_by_hash.get(content_hash)
        if task is not None:
            self._stop_early(early, seq, None)
            return task, task
        task = asyncio.create_task(self._grade_submission(sub_id, snap.path, content_hash, seq, grading_gpus,
                                                          started=early))
        self._inflight.add(task)
        self._grading_by_hash[content_hash] = task
        task.add_done_callback(self._inflight.discard)
        task.add_done_callback(lambda t, h=content_hash: self._grading_by_hash.pop(h, None))
        return task, None

    def _intake_failed(self, sub_id: int, seq: int, exc: BaseException) -> None:
        self.journal.set_submission(sub_id, status="rejected",
                                    error=f"the harness could not take it in ({type(exc).__name__}: {exc}); "
                                          f"not counted against the cap")
        self.journal.log("error", f"submission {seq}: intake failed: {type(exc).__name__}: {exc}", level="error",
                         data={"submission_id": sub_id, "traceback": traceback.format_exc()})

    def _stop_early(self, early: asyncio.Task | None, seq: int, same_as: int | None) -> None:
        """A grading started before the hash was known, for content graded already (or being graded)."""
        if early is None or early.done():
            return
        early.cancel()
        self.journal.log("grading", f"submission {seq}: its grading stopped, the same content as "
                                    f"{f'submission {same_as}' if same_as else 'a submission being graded'}",
                         data={"seq": seq, "phase": "stopped", "duplicate_of_seq": same_as})

    async def _intake(self, model_path: str, seq: int,
                      measured: Callable[[int], None] | None = None) -> tuple[Any, int | None]:
        """Open (by descriptor, no link followed), check, measure and snapshot the folder; the code
        revision it was submitted with. measured(bytes) is called (in the intake's thread) once the
        folder's size is known, before it is copied."""
        try:
            base_bytes, cap, factor = self._snapshot_cap()
            snap = await asyncio.to_thread(take_submission, self.workspace.root, model_path,
                                           self.home.snapshots / self.run_id / f"{seq:03d}", cap, base_bytes, factor,
                                           defer_hash_over=EARLY_GRADING_BYTES, measured=measured)
        except (OSError, RuntimeError) as exc:    # unreadable files, name too long, a symlink loop, ...
            raise SubmissionRejected(f"cannot read {model_path[:300]!r}: {exc}: make the folder and its files "
                                     f"readable regular files (no symlink loops, names under 255 bytes)",
                                     "unreadable") from None
        tracker = revision_tracker(self.journal, self.workspace.code)
        return snap, await snapshot_revision(self.journal, tracker, "submission")

    def _snapshot_cap(self) -> tuple[int, int, float | None]:
        """(base model bytes, snapshot cap, size factor): the cap is relative to the base model's size
        (harness-owned files, measured once per desk)."""
        if self._base_model_bytes is None:
            self._base_model_bytes = folder_bytes(self.workspace.model_dir)[0]
        factor = self.card.submission_cap.get("size_factor")
        return self._base_model_bytes, snapshot_cap(self._base_model_bytes, factor), factor

    def _mark_duplicate(self, sub_id: int, seq: int, earlier: "SubmissionRecord") -> dict:
        self.journal.set_submission(sub_id, status="duplicate", duplicate_of=earlier.id, score=earlier.score,
                                    improvement=earlier.improvement, graded_at=time.time())
        self.journal.log("submission", f"submission {seq} has the same content as submission {earlier.seq}: "
                                       f"returning its result",
                         data={"submission_id": sub_id, "duplicate_of": earlier.id})
        return {**self._response(earlier, duplicate=True), "duplicate_of": earlier.seq}

    # ------------------------------------------------------------------ grading
    def regrade_interrupted(self) -> None:
        """After an engine restart: grade again what the stop interrupted (its snapshot is there),
        or close it as an error (it is not)."""
        for row in self.store.interrupted_submissions(self.run_id):
            if row.snapshot_path and Path(row.snapshot_path).exists():
                self.journal.log("harness", f"re-grading submission {row.seq} interrupted by the engine restart")
                task = asyncio.create_task(self._regrade(row))
                self._inflight.add(task)
                task.add_done_callback(self._inflight.discard)
            else:
                self.journal.set_submission(row.id, status="error",
                                            error="the engine stopped before the snapshot was taken")

    async def _regrade(self, row: "SubmissionRecord") -> "SubmissionRecord":
        snapshot = Path(row.snapshot_path)
        if not row.content_hash:      # stopped before its copy was hashed
            digest = await asyncio.to_thread(hash_snapshot_folder, snapshot)
            self.journal.set_submission(row.id, content_hash=digest)
        return await self._grade_submission(row.id, snapshot, row.content_hash, row.seq)

    async def _grade_only(self, snapshot: Path, seq: int, gpus: list[str] | None) -> "GradingOutcome":
        work = self.grading.work_dir(f"submission-{seq:03d}")
        return await self.grading.grade(snapshot, "dev", work, for_submission=True, gpus=gpus)

    async def _grade_submission(self, sub_id: int, snapshot: Path, content_hash: str | None, seq: int,
                                gpus: list[str] | None = None,
                                started: "asyncio.Task[GradingOutcome] | None" = None) -> "SubmissionRecord":
        """Grade (or finish the grading `started`) and record; whatever happens, the submission ends
        `scored` or `error`."""
        try:
            return await self._grade_and_record(sub_id, snapshot, seq, gpus, started)
        except Exception as exc:  # noqa: BLE001 - recorded against this submission, never the run
            self.journal.log("error", f"submission {seq}: grading failed in the harness: {type(exc).__name__}: {exc}",
                             level="error", data={"submission_id": sub_id, "traceback": traceback.format_exc()})
            row = self.store.submission(sub_id)
            if row is not None and row.status == "scored":
                return row
            return self.journal.set_submission(sub_id, status="error", graded_at=time.time(),
                                               error=f"the harness failed while grading it "
                                                     f"({type(exc).__name__}: {exc})")
        finally:
            self.mirror_scores()

    async def _grade_and_record(self, sub_id: int, snapshot: Path, seq: int, gpus: list[str] | None = None,
                                started: "asyncio.Task[GradingOutcome] | None" = None) -> "SubmissionRecord":
        journal = self.journal
        outcome = await (started if started is not None else self._grade_only(snapshot, seq, gpus))
        if outcome.queue is not None:
            self._queue_info[sub_id] = outcome.queue
        if not outcome.ok:
            return journal.set_submission(sub_id, status="error", error=outcome.error, graded_at=time.time(),
                                          grading_s=outcome.wall_s)
        self.grading.store_samples(outcome.samples, "dev", submission_id=sub_id)
        baseline_dev = self.grading.baseline_dev
        improvement = None if baseline_dev is None else outcome.score - baseline_dev
        row = journal.set_submission(sub_id, status="scored", score=outcome.score, improvement=improvement,
                                     metrics=outcome.metrics, graded_at=time.time(),
                                     inference_s=outcome.timings.get("inference_s"), grading_s=outcome.wall_s)
        self.store.append_metric(self.run_id, "dev_score", outcome.score, step=seq, source="grading",
                                 attempt=journal.attempt)
        journal.bus.publish(ev.MetricPoint(self.run_id, name="dev_score", value=outcome.score, step=seq,
                                           source="grading"))
        best = self.store.best_submission(self.run_id)
        if best and best.id == sub_id:
            journal.update_run(best_dev_score=outcome.score, best_submission_id=sub_id, dev_improvement=improvement)
        journal.log("submission", f"submission {seq} scored {outcome.score:.2f} on dev"
                                  + (f" ({improvement:+.2f} vs baseline)" if improvement is not None else ""),
                    data={"submission_id": sub_id, "score": outcome.score, "improvement": improvement})
        write_run_meta(self.workspace, card=self.card, seed=journal.seed, budget_s=journal.budget_s,
                       start=journal.started_at, deadline=journal.deadline, last_submit_time=time.time())
        return row

    # ------------------------------------------------------------------ answers
    def mirror_scores(self) -> None:
        """scores.json in the workspace: the graded submissions in AutoRL-Bench's shape."""
        try:
            abapi.write_scores_mirror(self.workspace.root, self.store.graded_submissions(self.run_id),
                                      self.grading.baseline_dev)
        except OSError as exc:   # the agent owns the folder: a mirror it broke is its loss, never the run's
            self.journal.log("harness", f"scores.json mirror not written: {exc}", level="warning")

    def _response(self, row: "SubmissionRecord", duplicate: bool = False) -> dict:
        """The answer to a submission: AutoRL-Bench's fields as of `row` (for a duplicate, `row` is the
        earlier submission, so its answer comes back unchanged) plus ours."""
        answer = abapi.response_as_of(self.store.graded_submissions(self.run_id), row.to_dict(),
                                      self.grading.baseline_dev)
        if row.status == "scored":
            answer["improvement"] = row.improvement
        started_at = self.journal.started_at
        queue = None if duplicate else self._queue_info.get(row.id)
        if queue is not None:      # where it waited for a grading slot (position 0: it did not wait)
            answer["grading_queue"] = queue
        return {**answer, "duplicate": duplicate, "status": "duplicate" if duplicate else row.status,
                "run_elapsed_seconds": round(time.time() - (started_at or time.time()), 1)}

    def _failed_answer(self, row: "SubmissionRecord", seq: int) -> dict:
        """A failed grading: AutoRL-Bench answers 200 with score 0.0 and `error`; our own contract
        answers 422 `grading_failed` with the same body (docs/autorl-bench.md)."""
        body = {**self._response(row), "code": "grading_failed",
                "error": f"submission {seq} could not be graded: {row.error}"}
        if getattr(self.agent, "grading_api", "autorl-tui") == "autorl-bench":
            return body
        raise GradingFailed(body.pop("error"), body.pop("code"), body)

    def time_info(self) -> dict:
        """Ours (deadline, remaining_seconds, ...) and AutoRL-Bench's run_meta fields with `now` and
        `remaining`, from the run's own clock (never from run_meta.json, which the agent could replace)."""
        journal = self.journal
        now = time.time()
        last = self.store.last_graded_at(self.run_id)
        return {"deadline": journal.deadline, "remaining_seconds": max(0.0, (journal.deadline or now) - now),
                "budget_seconds": journal.run.budget_s, "state": journal.state,
                **abapi.time_fields(start=journal.started_at, budget_s=journal.budget_s,
                                    deadline=journal.deadline, last_submit=last, end=journal.run.ended_at)}

    def submissions_info(self) -> list[dict]:
        return [{"submission_id": r.pop("seq"), **r} for r in self.store.submission_summaries(self.run_id)]

    def health_info(self) -> dict:
        return {"ok": True, "status": "ok", "run_id": self.run_id, "task": self.card.id if self.card else None,
                "state": self.journal.state, "workspace": str(self.workspace.root) if self.workspace else None,
                "available_gpus": list(self.gpus)}

"""One attempt's agent, watched until it ends: its logs and actions, metrics, code revisions and
resources recorded as they come; its budgets (deadline, tokens, cost) and a cancel enforced by
killing its process tree. Offsets commit with the rows read up to them, so a restarted engine
resumes the watch without re-reading or losing a line."""

from __future__ import annotations

import asyncio
import os
import time
from typing import TYPE_CHECKING, Callable

from autorl_tui.engine import events as ev
from autorl_tui.instrument.filetail import FileTail
from autorl_tui.instrument.log_ingest import DEFAULT_MAX_BYTES, DEFAULT_MAX_EVENTS, LogIngest
from autorl_tui.instrument.metrics import MetricsCollector
from autorl_tui.instrument.resources import ProcessTreeSampler
from autorl_tui.instrument.sessions import SessionTracker
from autorl_tui.engine.run_outcomes import InfraRetry
from autorl_tui.engine.run_revisions import revision_tracker, snapshot_revision

if TYPE_CHECKING:
    from autorl_tui.catalog.agents import AgentSpec
    from autorl_tui.executors.base import AgentHandle
    from autorl_tui.engine.run_host import RunHost
    from autorl_tui.engine.run_journal import RunJournal
    from autorl_tui.engine.workspace import Workspace
    from autorl_tui.store.run_spec import RunSpec


class AgentWatch:
    TAIL_INTERVAL_S = 0.25
    REVISION_INTERVAL_S = 2.0
    RESOURCE_INTERVAL_S = 3.0

    def __init__(self, journal: "RunJournal", host: "RunHost", handle: "AgentHandle", *, workspace: "Workspace",
                 agent: "AgentSpec", spec: "RunSpec", gpus: list[str], cancel_reason: Callable[[], str | None]):
        self.journal = journal
        self.store = journal.store
        self.host = host
        self.handle = handle
        self.workspace = workspace
        self.agent = agent
        self.spec = spec
        self.gpus = gpus
        self.cancel_reason = cancel_reason
        self.kill_reason: str | None = None     # the harness's reason to end the agent (deadline, a budget)
        self._collector: MetricsCollector | None = None

    async def run(self, offsets: dict) -> tuple[int | None, str]:
        """Until the agent ends; its (exit code, why it ended)."""
        journal, handle = self.journal, self.handle
        out_tail = FileTail(handle.stdout_path, offsets.get("stdout", 0))
        err_tail = FileTail(handle.stderr_path, offsets.get("stderr", 0))
        stored = self.store.log_volume(journal.run_id)
        cap = self.spec.option("log_cap", {})
        metrics = self._metrics_collector(offsets.get("metrics"))
        revisions = revision_tracker(journal, self.workspace.code)
        sampler = ProcessTreeSampler()
        parser = self.host.make_parser(self.agent.output_format)
        ingest = LogIngest(out_tail, err_tail, parser, stored_events=stored.events, stored_bytes=stored.bytes,
                           max_events=int(cap.get("events", DEFAULT_MAX_EVENTS)),
                           max_bytes=int(cap.get("bytes", DEFAULT_MAX_BYTES)))
        handle.on_wait = self._cluster_wait
        if journal.run.waiting and handle.waiting is None:      # recorded by an engine that stopped
            journal.update_run(waiting=None)
        wait_task = asyncio.create_task(handle.wait())
        next_rev = next_res = 0.0
        try:
            while True:
                done = wait_task.done()
                # Reading, decoding and parsing happen off the loop, a bounded batch per pass; the
                # transformers/TRL log dicts in those lines feed the metrics collector there too.
                batch = await asyncio.to_thread(self._read_logs, ingest, metrics, done)
                final = done and batch.exhausted
                points, notes = await asyncio.to_thread(metrics.poll, final)
                # Rows are appended after the await, then the offsets staged: the engine's flush
                # loop (which runs at awaits) commits both or neither.
                self._pump_batch(batch, ingest)
                self._pump_metrics(points, metrics.take_upgrades())
                for note in notes:
                    self._metrics_note(note)
                # Offsets commit with the rows read up to them (same transaction): resumable, no
                # duplicates. Staged before anything below can commit (a revision insert flushes).
                self.store.stage_attempt_offsets(journal.run_id, journal.attempt,
                                                 {"stdout": out_tail.offset, "stderr": err_tail.offset,
                                                  "metrics": metrics.offsets()})
                now = time.time()
                if now >= next_rev or final:
                    next_rev = now + self.REVISION_INTERVAL_S
                    if final or revisions.due(now):
                        await snapshot_revision(journal, revisions, "final" if final else "change")
                if now >= next_res and not final:
                    next_res = now + self.RESOURCE_INTERVAL_S
                    self._sample_resources(sampler)
                if final:
                    if ingest.dropped_lines:
                        journal.log("harness", f"{ingest.dropped_lines:,} log lines of attempt {journal.attempt} were "
                                               f"not stored (over the run's log cap); the full log is in "
                                               f"{handle.stdout_path.parent}",
                                    level="warning", data={"dropped_lines": ingest.dropped_lines})
                    break
                await self._enforce(now)
                if batch.exhausted:
                    await asyncio.wait({wait_task}, timeout=self.TAIL_INTERVAL_S)
                else:
                    await asyncio.sleep(0)      # more is waiting: the next batch, after other work had its turn
        finally:
            if not wait_task.done():
                wait_task.cancel()
        code = wait_task.result()
        info = getattr(handle, "exit_info", lambda: None)() or {}
        reason = info.get("reason") or self.kill_reason or "exited"
        if self.kill_reason:     # the harness's own reason wins over how the executor saw it
            reason = self.kill_reason
        if reason == "node_lost":     # a cluster node went away: an infrastructure failure, retried
            self.store.update_attempt(journal.run_id, journal.attempt, {"state": "lost", "exit_code": code,
                                                                         "error": info.get("error"),
                                                                         "ended_at": time.time()})
            journal.log("harness", f"agent lost: {info.get('error')}", level="error", data={"exit_code": code})
            raise InfraRetry(f"the agent's node was lost: {info.get('error')}")
        self.store.update_attempt(journal.run_id, journal.attempt,
                                  {"state": "exited" if reason == "exited" else "killed", "exit_code": code,
                                   "ended_at": time.time()})
        journal.log("harness", f"agent ended: {reason} (exit code {code})", data={"exit_code": code, "reason": reason})
        return code, reason

    async def _cluster_wait(self, why: str | None, waited_s: float) -> None:
        """The executor lost its cluster (why) or has it back (None, after waited_s): the run says
        it waits (`runs.waiting`, an event) and its budget clock stops meanwhile, as in the queue:
        the deadline moves by the time waited (on the node too)."""
        journal = self.journal
        if why is not None:
            journal.update_run(waiting="cluster")
            journal.log("harness", f"waiting for cluster: {why}; the budget clock is stopped", level="warning",
                        data={"waiting": "cluster", "budget_clock": "stopped"})
            return
        journal.update_run(waiting=None)
        data: dict = {"waiting": None, "budget_clock": "restarted", "waited_s": round(waited_s, 1)}
        if journal.deadline:
            journal.deadline += waited_s
            journal.update_run(deadline=journal.deadline)
            data["deadline"] = journal.deadline
            if self.handle.is_alive():
                await self.handle.extend_deadline(journal.deadline)
        journal.log("harness", f"the cluster is back after {waited_s:.0f} s; the budget clock restarted "
                               f"(deadline moved by {waited_s:.0f} s)", data=data)

    async def _enforce(self, now: float) -> None:
        """A cancel, a spent usage budget or the deadline ends the agent's process tree (not while
        the executor waits for its cluster: the budget clock is stopped)."""
        handle, cancel = self.handle, self.cancel_reason()
        if handle.waiting is not None:
            return
        if cancel and handle.is_alive():
            await handle.kill(cancel)
        elif self.kill_reason and self.kill_reason != "deadline" and handle.is_alive():
            await handle.kill(self.kill_reason)
        elif self.journal.deadline and now >= self.journal.deadline and handle.is_alive():
            self.kill_reason = "deadline"
            self.journal.log("harness", "deadline reached: killing the agent's process tree", level="warning")
            await handle.kill("deadline")

    @staticmethod
    def _read_logs(ingest: LogIngest, metrics: MetricsCollector, final: bool):
        """In a worker thread: one bounded batch of the agent's output, its metric lines fed on."""
        batch = ingest.read_batch(final)
        metrics.feed_stdout(batch.read)      # transformers prints its log dicts on stdout (or stderr)
        return batch

    def _pump_batch(self, batch, ingest: LogIngest) -> None:
        log = self.journal.log
        if batch.streams or batch.actions:
            # Commit what earlier passes staged (rows + their offsets) so that this batch's rows can
            # never be committed with an older offset by the store's size-triggered flush.
            self.store.flush()
        for stream, lines in batch.streams:
            self.journal.log_lines(stream, lines, level="info" if stream == "stdout" else "stderr")
        for action, keep in batch.actions:
            self._record_action(action, store=keep)
        if batch.truncated_now:
            log_dir = self.handle.stdout_path.parent
            log("harness", f"log truncated: this run's log cap ({ingest.max_events:,} events or "
                           f"{ingest.max_bytes:,} bytes) is reached; later lines are not stored, the full log "
                           f"is in {log_dir}", level="warning",
                data={"max_events": ingest.max_events, "max_bytes": ingest.max_bytes, "log_dir": str(log_dir)})

    def _record_action(self, action, store: bool = True) -> None:
        data = action.to_dict() if hasattr(action, "to_dict") else dict(action)
        summary = getattr(action, "summary", None)
        message = summary() if callable(summary) else str(data.get("kind"))
        if store:
            self.journal.log("action", message, level="error" if data.get("kind") in ("error", "malformed") else "info",
                             data=data)
        if data.get("kind") == "usage":      # usage actions are increments (instrument/actions.py)
            run = self.journal.run
            fields = {col: (getattr(run, col) or 0) + data[col] for col in ("tokens_in", "tokens_out", "cost_usd")
                      if data.get(col) is not None}
            if fields:
                self.journal.update_run(**fields)
                self._check_usage_budgets()

    def _check_usage_budgets(self) -> None:
        """A plan's token and cost budgets end the agent like the wall-clock one does."""
        options, run = self.spec.options, self.journal.run
        tokens = (run.tokens_in or 0) + (run.tokens_out or 0)
        reason = None
        if options.get("token_budget") and tokens > float(options["token_budget"]):
            reason = f"token budget exhausted ({tokens:,} > {int(options['token_budget']):,} tokens)"
        elif options.get("cost_budget") and (run.cost_usd or 0) > float(options["cost_budget"]):
            reason = f"cost budget exhausted (${run.cost_usd:.4f} > ${float(options['cost_budget']):.4f})"
        if reason and self.kill_reason is None:
            self.kill_reason = reason
            self.journal.log("harness", f"{reason}: killing the agent's process tree", level="warning")

    def _metrics_collector(self, offsets: dict | None) -> MetricsCollector:
        """The run's metrics collector; after an engine restart its sessions and stored points come
        back from the store, so that nothing is stored twice."""
        store, run_id, attempt = self.store, self.journal.run_id, self.journal.attempt
        tracker = SessionTracker(
            lambda row: store.append_session(run_id, attempt=attempt, kind=row["kind"], sources=row["sources"],
                                             started_at=row["started_at"]),
            lambda sid, fields: store.stage_session_update(sid, fields))
        if offsets:
            tracker.restore(store.training_sessions_of(run_id, attempt), store.session_points(run_id))
        rel = os.path.relpath(self.workspace.metrics_file, self.workspace.root)
        self._collector = MetricsCollector(self.workspace.root, offsets, tracker, metrics_file=rel)
        return self._collector

    def _metrics_note(self, note) -> None:
        """A metrics file the harness would not read is the agent's error, recorded as such; the run goes on."""
        if note.agent_error:
            self.journal.log("error", f"agent error: {note.message}", level="warning",
                             data={"source": "agent", "path": note.path, "problem": note.message})
        else:
            self.journal.log("harness", note.message, level="warning", data={"path": note.path})

    def _pump_metrics(self, points, upgrades=()) -> None:
        run_id = self.journal.run_id
        for p in points:
            row_id = self.store.append_metric(run_id, p.name, p.value, step=p.step, source=p.source,
                                              phase=p.phase, attempt=self.journal.attempt, ts=p.ts,
                                              session_id=getattr(p, "session", None))
            if getattr(p, "key", None) and self._collector is not None:
                self._collector.tracker.stored(p.key, row_id)
        for up in upgrades:       # a better source refined a stored point: same transaction as the offsets
            self.store.stage_metric_update(up.row_id, up.fields)
        # The bus gets at most a few hundred points per tick: a flood must not swamp subscribers.
        for p in points[-500:]:
            self.journal.bus.publish(ev.MetricPoint(run_id, name=p.name, value=p.value, step=p.step,
                                                    source=p.source, phase=p.phase, ts=p.ts,
                                                    session=getattr(p, "session", None)))

    def _sample_resources(self, sampler: ProcessTreeSampler) -> None:
        sample = sampler.sample(self.handle.pids())
        gpus = self.host.gpu_samples(self.gpus)
        self.store.append_resource(self.journal.run_id, gpus=gpus, **sample)
        self.journal.bus.publish(ev.ResourceSample(self.journal.run_id, gpus=gpus, **sample))

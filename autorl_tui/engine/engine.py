"""The engine: owns the home (lock + store), the queue, and one supervisor per active run.

UI-agnostic and asyncio-based: the console runs it on Textual's loop (or talks to it over the
socket), `--batch` on its own loop. Commands come in as method calls; everything that happens
goes out as typed events on `bus`."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
from pathlib import Path

from autorl_tui.catalog.agents import agent_search_path, find_agent
from autorl_tui.catalog.models import builtin_models, resolve_model
from autorl_tui.catalog.plans import Plan, RunRequest, isolation_of
from autorl_tui.catalog.tasks import (DataUnavailable, find_task, local_data_root, provider_data_missing,
                                     task_search_path)
from autorl_tui.engine import events as ev
from autorl_tui.executors.agent_runtime import AgentRuntimeMissing
from autorl_tui.executors.agent_runtime import find as find_agent_runtime
from autorl_tui.engine.events import EventBus
from autorl_tui.grading_host.grading_queue import GradingQueue, default_slots
from autorl_tui.executors import Executor, executor_class
from autorl_tui.run_states import ACTIVE_STATES, FINAL_STATES, UNSUCCESSFUL_STATES
from autorl_tui.engine.supervisor import RunSupervisor
from autorl_tui.catalog.overlays import exposure, overlay_env
from autorl_tui.catalog.script_scan import ScriptNeeds, missing_pieces, unsupplied_checkouts
from autorl_tui.exitcodes import UsageError
from autorl_tui.home import EngineLock, Home
from autorl_tui.store import Store
from autorl_tui.store.engine_records import QueueEntry
from autorl_tui.store.records import RunRecord
from autorl_tui.store.run_spec import RunSpec

def check_model_fits(card, model: str, override: str | None) -> None:
    """A card's `models:` names the built-in models made for it (tiny-webshop for webshop): another
    built-in one would be graded to nothing without a word, so it is refused unless the plan says
    `model_mismatch: allow`. A model folder of the user's is always taken."""
    expected = [str(m) for m in card.raw.get("models") or []]
    if not expected or model in expected or override == "allow":
        return
    raise UsageError(f"task {card.id} is made for model {' or '.join(expected)} (its card's `models:`), not the "
                     f"built-in {model!r}; pair them with `cells: [{{task: {card.id}, model: {expected[0]}}}]`, "
                     f"or set `model_mismatch: allow` in the plan to run it anyway")


def _slug(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9]+", "-", text).strip("-")[:24] or "x"


class Engine:
    FLUSH_INTERVAL_S = 0.25

    def __init__(self, home: Home, *, concurrency: int | None = None, gpus: list[str] | None = None,
                 agents_dirs: list[Path] | None = None, tasks_dirs: list[Path] | None = None,
                 role: str = "engine"):
        self.home = home
        self.bus = EventBus()
        self.lock = EngineLock(home)
        self.role = role
        self.store: Store | None = None
        self.agents_dirs = [Path(p) for p in (agents_dirs or [])]
        self.tasks_dirs = [Path(p) for p in (tasks_dirs or [])]
        self.gpu_inventory: list[str] = list(gpus or [])
        cpus = os.cpu_count() or 1
        self.concurrency = concurrency or max(1, cpus // 2)
        self.grader_threads = max(1, cpus // max(1, self.concurrency))
        self.grading_queue = GradingQueue(default_slots(cpus, self.grader_threads, len(self.gpu_inventory)))
        self.supervisors: dict[str, RunSupervisor] = {}
        self.queue_paused = False
        self.draining = False
        self._executors: dict[str, object] = {}
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task | None = None
        self._flush_task: asyncio.Task | None = None
        self._idle = asyncio.Event()
        self._baseline_locks: dict[tuple, asyncio.Lock] = {}
        self._stopping = False
        from autorl_tui.engine.scheduling import RetryPolicy

        self.retry_policy = RetryPolicy()
        self.started_at: float | None = None
        self._cluster_shown: dict | None = None
        self._cluster_unreachable: str | None = None     # why admission could not read the Ray cluster, last time

    # ------------------------------------------------------------------ life cycle
    async def start(self) -> None:
        store_path = self.home.writer_store_path()     # refused before anything is held or written
        self.home.ensure()
        self.lock.acquire(self.role)
        try:
            self.store = Store(store_path)
        except Exception:
            self.lock.release()
            raise
        self.started_at = time.time()
        await self._reconcile()
        self._loop_task = asyncio.create_task(self._schedule_loop(), name="engine-scheduler")
        self._flush_task = asyncio.create_task(self._flush_loop(), name="engine-flush")

    async def stop(self, cancel_runs: bool = False) -> None:
        """Stop the engine. With cancel_runs, active runs are cancelled first; otherwise their
        agents keep running (local shims and containers enforce their deadlines) and the next
        engine re-adopts them."""
        if cancel_runs:
            reason = "engine stopped with --cancel-runs"
            for row in self.store.runs(["queued"]):     # queued runs would start under the next engine
                await self.cancel(row["id"], reason)
            await asyncio.gather(*(s.cancel(reason) for s in list(self.supervisors.values())),
                                 return_exceptions=True)
            tasks = [s.task for s in self.supervisors.values() if s.task]
            if tasks:
                await asyncio.wait(tasks, timeout=30)
        self._stopping = True
        for t in (self._loop_task, self._flush_task):
            if t:
                t.cancel()
        # Wait for them to end before the store closes (wait_for can swallow a cancellation).
        await asyncio.gather(*(t for t in (self._loop_task, self._flush_task) if t), return_exceptions=True)
        sup_tasks = [s.task for s in self.supervisors.values() if s.task and not s.task.done()]
        for t in sup_tasks:
            t.cancel()
        if sup_tasks:
            await asyncio.gather(*sup_tasks, return_exceptions=True)
        from autorl_tui.grading_host import grader_service

        await asyncio.to_thread(grader_service.close_all)    # the warm graders end with their engine
        for ex in list(self._executors.values()):     # and an executor's graders elsewhere (a cluster's nodes)
            await ex.close()
        if self.store is not None:
            self.store.close()
            self.store = None
        self.lock.release()

    async def _flush_loop(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.FLUSH_INTERVAL_S)
            try:
                self.store.flush()
            except Exception as exc:  # keep the engine alive; the error is visible in the store later
                print(f"autorl-tui: store flush failed: {exc}", file=sys.stderr)

    # ------------------------------------------------------------------ catalog helpers
    def agent_search_path(self) -> list[Path]:
        return agent_search_path(self.agents_dirs, self.home.root)

    def task_search_path(self) -> list[Path]:
        return task_search_path(self.tasks_dirs, self.home.root)

    def executor(self, name: str) -> Executor:
        if name not in self._executors:
            self._executors[name] = executor_class(name).for_engine(self.home.root)
        return self._executors[name]

    def baseline_lock(self, key: tuple) -> asyncio.Lock:
        return self._baseline_locks.setdefault(key, asyncio.Lock())

    def private_paths(self) -> list[Path]:
        """What a local agent must never read: the store, caches with held-out splits, snapshots,
        harness logs, reports, task sources and the data generators (which could regenerate a
        procedural held-out split)."""
        h = self.home
        paths = [h.store.path.with_name(h.store.path.name + n) for n in ("", "-wal", "-shm")] + [h.lock_path]
        paths += [h.cache, h.snapshots, h.runs_dir, h.gradings, h.reports, h.models, h.data]
        paths += [p for p in self.task_search_path() if p.is_dir()]
        package = Path(__file__).resolve().parents[1]
        paths += [package / "catalog" / "generators", package / "grading"]
        return [p for p in paths if p.exists()]

    def _protected_folders(self, card) -> list[tuple[str, Path]]:
        """What an operator's bind or copy must neither hold nor lie inside (catalog/overlays.exposure)."""
        out = [("the engine's home (the store, other runs, cached held-out splits)", self.home.root),
               ("the engine's store", self.home.store.path),
               ("the harness's own code", Path(__file__).resolve().parents[1])]
        out += [("a task folder (task sources and data)", p) for p in self.task_search_path() if p.is_dir()]
        root = local_data_root(card) if card.data.get("provider") == "local" else None
        return out + ([("the task's data (its held-out split)", root)] if root else [])

    def make_parser(self, output_format: str):
        if output_format == "text":
            return None
        try:
            from autorl_tui.instrument.parsers import get_parser
        except ImportError:
            return None
        return get_parser(output_format)

    def gpu_samples(self, gpus: list[str]) -> list[dict] | None:
        if not gpus:
            return None
        from autorl_tui.executors.gpus import sample_utilization

        return [s.__dict__ if hasattr(s, "__dict__") else dict(s) for s in sample_utilization(gpus)] or None

    # ------------------------------------------------------------------ queue
    def _validate(self, req: RunRequest) -> RunSpec:
        card = find_task(req.task, self.task_search_path(), protocol=req.protocol,
                         data_home=self.home.data)
        if card.data.get("provider") == "local" and local_data_root(card) is None:
            try:
                from autorl_tui.catalog.tasks import materialize

                materialize(card, "train", self.home.cache / "tasks")
            except DataUnavailable:
                raise
        elif card.data.get("provider") == "python":    # a benchmark card without its data stops here
            why = provider_data_missing(card)
            if why:
                raise DataUnavailable(why)
        agent = find_agent(req.agent, self.agent_search_path())
        overlay = req.options.get("overlay") or {}
        given = overlay_env(overlay, os.environ)       # refuses a named variable unset here
        exposed = exposure(overlay, self._protected_folders(card), agent.name)
        if exposed:
            raise UsageError(exposed)
        if agent.script:      # an AutoRL-Bench folder: the CLIs and checkouts its start script needs
            needs = ScriptNeeds(clis=list(agent.script["clis"]), checkouts=list(agent.script["checkouts"]))
            copies = overlay.get("copies") or {}     # checked as the operator's folders they are copied from
            environ, passed = {**os.environ, **given, **copies}, set(agent.env) | set(given) | set(copies)
            shown = [*(overlay.get("binds") or []), *copies.values()] if isolation_of(req) != "none" else ["/"]
            missing = missing_pieces(needs, environ) or unsupplied_checkouts(needs, environ, passed, shown)
            if missing:
                raise UsageError(f"agent {agent.name} ({agent.agent_dir}): {'; '.join(missing)}")
        if req.model not in builtin_models():
            resolve_model(req.model, self.home.models, build=False)
        else:
            check_model_fits(card, req.model, req.options.get("model_mismatch"))
        ex = self.executor(req.executor)
        if not (ex.takes_images and (req.options.get("image") or agent.image)):
            # the agent runs on the agent runtime (executors/agent_runtime.py), never on the harness's
            try:
                find_agent_runtime()
            except AgentRuntimeMissing as exc:
                raise UsageError(f"agent {agent.name} cannot run here: {exc}") from None
        why = ex.check_host(req.isolation, list(self.gpu_inventory) if req.gpus else [])
        if why:
            raise UsageError(why)
        # a cluster executor: its nodes, not this engine's devices, must hold it (`enqueue_plan`)
        if ex.uses_host_slots and req.gpus and len(self.gpu_inventory) < req.gpus:
            raise UsageError(f"run asks for {req.gpus} GPU(s) but this engine has {len(self.gpu_inventory)} "
                             f"({', '.join(self.gpu_inventory) or 'none: CPU slots only'})")
        model_name = Path(req.model).name if ("/" in req.model) else req.model
        task = card.to_dict()
        return RunSpec(task=task, agent=agent.to_dict(), model=req.model, model_name=model_name, seed=req.seed,
                       executor=req.executor, driver=req.driver, options=req.options,
                       protocol=card.protocol.to_dict(), protocol_name=card.protocol_name, level=card.level,
                       data_origin=task["data_origin"], isolation=isolation_of(req))

    def _next_run_number(self) -> int:
        return self.store.count_runs() + 1

    async def enqueue_plan(self, plan: Plan) -> list[str]:
        specs = [self._validate(r) for r in plan.runs]   # everything validated before anything is queued
        for req in plan.runs:       # a cluster's own checks (off the loop: connecting can take minutes)
            await self.executor(req.executor).validate(f"{req.task}/{req.agent}", req.gpus, req.options)
        now = time.time()
        plan_id = f"p{int(now * 1000):x}-{_slug(plan.name)}"
        self.store.add_plan(plan_id, plan.name, plan.source, now)
        max_pos = self.store.last_queue_pos()
        ids = []
        n = self._next_run_number()
        for i, (req, spec) in enumerate(zip(plan.runs, specs)):
            # By the card's id and the spec's name: a plan may use an alias or an agent folder's path.
            task_id, agent_name = spec.task["id"], spec.agent["name"]
            run_id = f"r{n + i:04d}-{_slug(task_id)}-{_slug(agent_name)}-s{req.seed}"
            self.store.add_run(RunRecord(
                id=run_id, plan_id=plan_id, plan_name=plan.name, task=task_id, level=spec.level,
                agent=agent_name, model=req.model, driver=req.driver, seed=req.seed,
                budget_s=req.budget_s, executor=req.executor, gpus_requested=req.gpus,
                priority=req.priority, queue_pos=max_pos + 1 + i, state="queued", created_at=now, spec=spec))
            ids.append(run_id)
            self.store.append_event(run_id, "state", "queued", data={"state": "queued", "plan": plan.name})
            self.bus.publish(ev.RunStateChanged(run_id, state="queued"))
        self.store.flush()
        self._idle.clear()
        self._wake.set()
        await asyncio.to_thread(self._prestart_grader, [(req.executor, req.gpus, spec) for req, spec in
                                                        zip(plan.runs, specs)])
        return ids

    def _prestart_grader(self, runs: list[tuple[str, int, RunSpec]]) -> None:
        """The engine's warm grading server (the one its CPU runs share: every built-in task's, and
        one per task folder of the user's), started in the background as soon as a run of it is
        queued: a run then never waits for a server's start (docs/grading.md, "The warm grader").
        runs: (executor, GPUs asked for, spec) of the runs queued."""
        from autorl_tui.grading_host.grading_client import prestart_warm

        tasks = {json.dumps(spec.task, sort_keys=True): spec.task for executor, gpus, spec in runs
                 if not executor_class(executor).grades_remotely and not gpus and spec.task
                 and spec.task.get("scorer") != "judge"}       # the judge's gradings take the cold path
        for task in tasks.values():
            request = {"task": task, "scorer": task.get("scorer"),
                       "scorer_options": {**(task.get("scorer_options") or {})}}
            try:
                prestart_warm(request, self.home.gradings / "_" / "_", threads=self.grader_threads,
                              grading_root=self.home.gradings)
            except OSError as exc:        # an optimisation: the run's preparing starts it then
                print(f"autorl-tui: warm grader not started ahead: {exc}", file=sys.stderr)

    def runs(self, states: list[str] | None = None) -> list[dict]:
        return self.store.runs(states)

    def get_run(self, run_id: str) -> dict:
        row = self.store.run(run_id)
        if row is None:
            raise UsageError(f"no run {run_id!r} in {self.home.root}; `autorl-tui runs list` shows them")
        return row

    def _queued(self) -> list[QueueEntry]:
        return self.store.queued_runs()

    def busy_gpus(self) -> set[str]:
        """Derived from live supervisors every time, never from separate bookkeeping."""
        return {g for s in self.supervisors.values() for g in s.gpus}

    def _plan_starts(self) -> list[tuple[str, list[str]]]:
        queued = self._queued()
        if not queued:
            return []
        starts = []
        for name in dict.fromkeys(r.executor for r in queued):
            if not self._on_host_slots(name):
                starts += self._plan_cluster_starts(name, [r for r in queued if r.executor == name])
        on_host = [r for r in queued if self._on_host_slots(r.executor)]
        if not on_host:
            return starts
        return starts + self._plan_local_starts(on_host)

    def _on_host_slots(self, name: str) -> bool:
        """Whether runs of executor `name` hold this host's slots. An executor no longer installed
        (a run queued by an earlier engine) counts as the host's: its start then fails with the reason."""
        try:
            return self.executor(name).uses_host_slots
        except ValueError:
            return True

    def _plan_cluster_starts(self, name: str, queued: list[QueueEntry]) -> list[tuple[str, list[str]]]:
        """A cluster executor's runs: our order, the cluster's room (`Executor.admit_runs`); no local device ids."""
        if not queued or self.queue_paused or self.draining:
            return []
        now = time.time()
        ready = [r for r in queued if (r.not_before or 0.0) <= now]
        reqs = [(r.run_id, r.gpus_requested, RunSpec.from_dict(self.store.get("runs", r.run_id)["spec"]).options)
                for r in ready]
        # A run whose agent has ended (finalizing) still counts: its held-out test grading takes as
        # many GPUs from the cluster (ray_grading.py), and must not wait behind runs started meanwhile.
        active = [(s.run_id, s.gpus_requested, s.spec.options)
                  for s in self.supervisors.values() if s.executor_name == name]
        try:
            starts = [(run_id, []) for run_id in self.executor(name).admit_runs(reqs, active)]
        except Exception as exc:      # the cluster is unreachable now: the runs wait
            self._cluster_reachability(str(exc) or type(exc).__name__)
            return []
        self._cluster_reachability(None)
        return starts

    def _cluster_reachability(self, error: str | None) -> None:
        """Said once when the Ray cluster becomes unreachable and once when it is back (admission
        asks every pass, twice a second)."""
        if (error is None) == (self._cluster_unreachable is None):
            return
        self._cluster_unreachable = error
        if error is not None:
            message, level = f"cannot reach the Ray cluster: {error}; its queued runs wait", "warning"
        else:
            message, level = "the Ray cluster is reachable again", "info"
        print(f"autorl-tui: {message}", file=sys.stderr)
        self.store.append_event(None, "harness", message, level=level)

    def _plan_local_starts(self, queued: list[QueueEntry]) -> list[tuple[str, list[str]]]:
        from autorl_tui.engine.scheduling import ActiveRun, QueuedRun, plan_starts

        queue = [QueuedRun(run_id=r.run_id, gpus=r.gpus_requested or 0, priority=r.priority,
                           queue_pos=r.queue_pos, enqueued_at=r.created_at, budget_s=r.budget_s,
                           not_before=r.not_before or 0.0)
                 for r in queued]
        local = [s for s in self.supervisors.values() if self._on_host_slots(s.executor_name)]
        active = [ActiveRun(run_id=s.run_id, gpus=tuple(s.gpus), expected_end=s.deadline) for s in local]
        paused = self.queue_paused or self.draining
        if self.gpu_inventory:
            free = [g for g in self.gpu_inventory if g not in self.busy_gpus()]
            # Slots per resource: a GPU run holds its GPUs; a CPU-only run (gpus: 0) one of the
            # concurrency's CPU slots, never a GPU's.
            cpu_only = [s for s in local if not s.gpus_requested]
            return plan_starts(queue, free, time.time(), active=active, paused=paused,
                               free_cpu_slots=max(0, self.concurrency - len(cpu_only)),
                               inventory=self.gpu_inventory)
        return plan_starts(queue, [], time.time(), active=active, paused=paused,
                           free_slots=max(0, self.concurrency - len(local)))

    async def _schedule_loop(self) -> None:
        while not self._stopping:
            for run_id, gpus in self._plan_starts():
                row = self.store.run(run_id)
                if row is None or row["state"] != "queued":
                    continue
                sup = RunSupervisor(self, RunRecord.from_row(row), gpus)
                self.supervisors[run_id] = sup
                sup.start()
            self._publish_cluster()
            if not self.supervisors and not self._queued():
                self._idle.set()
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=0.5)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()

    def cluster_state(self) -> dict | None:
        """The Ray cluster as the console shows it (nodes, GPUs, which attempt holds which), from the
        background view: never waits on Ray. None while this engine uses no cluster."""
        from autorl_tui.executors import cluster_executors
        from autorl_tui.store.queries import StoreReader

        for name, cls in cluster_executors():
            if name in self._executors or cls.cluster_configured():
                return self.executor(name).cluster_state(StoreReader.over(self.store))
        return None

    def _publish_cluster(self) -> None:
        state = self.cluster_state()
        if state != self._cluster_shown:
            self._cluster_shown = state
            self.bus.publish(ev.ClusterChanged(None, cluster=state))

    def supervisor_finished(self, sup: RunSupervisor) -> None:
        if self.supervisors.get(sup.run_id) is sup:
            del self.supervisors[sup.run_id]
        # What the run held on a cluster is free for admission now; released there only when the
        # run has ended (not when the engine stops, leaving its agent to the next engine).
        row = self.store.run(sup.run_id)
        ended = row is not None and str(row["state"]) in FINAL_STATES
        for ex in self._executors.values():
            ex.forget(sup.run_id, ended=ended)
        self._wake.set()

    async def wait_idle(self) -> None:
        while True:
            self._idle.clear()
            self._wake.set()
            await self._idle.wait()
            if not self.supervisors and not self._queued():
                return

    async def wait_runs(self, run_ids: list[str]) -> list[dict]:
        sub = self.bus.subscribe()
        try:
            while True:
                rows = [self.store.run(r) for r in run_ids]
                if all(r["state"] in FINAL_STATES for r in rows):
                    return rows
                try:
                    await asyncio.wait_for(sub.get(), timeout=1.0)
                except asyncio.TimeoutError:
                    pass
                sub.drain()
        finally:
            sub.close()

    # ------------------------------------------------------------------ commands
    async def cancel(self, run_id: str, reason: str = "cancelled by user") -> None:
        row = self.get_run(run_id)
        sup = self.supervisors.get(run_id)
        if sup is not None:
            await sup.cancel(reason)
        elif row["state"] == "queued":
            self.store.set_run_fields(run_id, {"state": "cancelled", "failure_source": "user", "end_reason": reason,
                                               "ended_at": time.time()})
            self.store.append_event(run_id, "state", f"state queued → cancelled: {reason}",
                                    data={"state": "cancelled", "previous": "queued", "reason": reason})
            self.store.flush()
            self.bus.publish(ev.RunStateChanged(run_id, state="cancelled", previous="queued", reason=reason,
                                                failure_source="user"))
            self._wake.set()
        else:
            raise UsageError(f"run {run_id} is {row['state']}: nothing to cancel")

    def _supervisor(self, run_id: str) -> RunSupervisor:
        self.get_run(run_id)
        sup = self.supervisors.get(run_id)
        if sup is None:
            raise UsageError(f"run {run_id} is not active")
        return sup

    async def pause(self, run_id: str) -> None:
        try:
            await self._supervisor(run_id).pause()
        except ValueError as exc:
            raise UsageError(str(exc)) from None

    async def resume(self, run_id: str) -> None:
        try:
            await self._supervisor(run_id).resume()
        except ValueError as exc:
            raise UsageError(str(exc)) from None

    async def extend_budget(self, run_id: str, seconds: float) -> None:
        if seconds <= 0:
            raise UsageError("extend the budget by a positive number of seconds")
        row = self.get_run(run_id)
        if run_id in self.supervisors:
            await self.supervisors[run_id].extend(seconds)
        elif row["state"] == "queued":
            self.store.set_run_fields(run_id, {"budget_s": row["budget_s"] + seconds})
            self.bus.publish(ev.RunUpdated(run_id, fields={"budget_s": row["budget_s"] + seconds}))
        else:
            raise UsageError(f"run {run_id} is {row['state']}: its budget can no longer change")

    async def retry(self, run_id: str) -> str:
        row = self.get_run(run_id)
        if row["state"] not in UNSUCCESSFUL_STATES:
            raise UsageError(f"run {run_id} is {row['state']}: only failed, cancelled or lost runs can be retried")
        spec = RunSpec.from_dict(row["spec"])
        req = RunRequest(task=row["task"], agent=row["agent"], model=row["model"], seed=row["seed"],
                         budget_s=row["budget_s"], executor=row["executor"], gpus=row["gpus_requested"],
                         driver=row["driver"], priority=row["priority"], options=dict(spec.options),
                         protocol=spec.protocol_name, isolation="sandbox" if spec.isolated else "none")
        plan = Plan(name=f"retry of {run_id}", source=f"retry: {run_id}", runs=[req], raw={})
        [new_id] = await self.enqueue_plan(plan)
        self.store.append_event(run_id, "harness", f"retried as {new_id}", data={"retry": new_id})
        return new_id

    async def move_to_front(self, run_id: str) -> None:
        row = self.get_run(run_id)
        if row["state"] != "queued":
            raise UsageError(f"run {run_id} is {row['state']}: only queued runs can be reordered")
        # The queue is ordered by priority, then position: the front needs both, or the run stays
        # behind every run of a higher priority while the operator was told it moved to the front.
        fields = {"queue_pos": self.store.first_queued_pos() - 1,
                  "priority": max(int(row["priority"] or 0), self.store.top_queued_priority())}
        self.store.set_run_fields(run_id, fields)
        self.bus.publish(ev.RunUpdated(run_id, fields=fields))
        self._wake.set()

    async def set_priority(self, run_id: str, priority: int) -> None:
        self.get_run(run_id)
        self.store.set_run_fields(run_id, {"priority": int(priority)})
        self.bus.publish(ev.RunUpdated(run_id, fields={"priority": int(priority)}))
        self._wake.set()

    async def pause_queue(self) -> None:
        self.queue_paused = True
        self.bus.publish(ev.QueueChanged(None, paused=True))

    async def resume_queue(self) -> None:
        self.queue_paused = False
        self.draining = False
        self.bus.publish(ev.QueueChanged(None, paused=False))
        self._wake.set()

    async def drain(self) -> None:
        """Start nothing new; let active runs finish."""
        self.draining = True
        self.bus.publish(ev.QueueChanged(None, paused=True))

    # ------------------------------------------------------------------ restart
    async def _reconcile(self) -> None:
        """Match what the store says is live against what really is: re-adopt running agents,
        redo harness-side steps that were interrupted, mark what cannot be recovered `lost`."""
        live_containers: set[str] = set()
        for row in self.runs(list(ACTIVE_STATES)):
            run_id = row["id"]
            self.store.append_event(run_id, "harness", f"engine restarted while the run was {row['state']}")
            if row["state"] in ("preparing", "baseline"):
                self.store.set_run_fields(run_id, {"state": "queued"})
                self.store.append_event(run_id, "state", f"state {row['state']} → queued: engine restarted before "
                                                         f"the agent started", data={"state": "queued"})
                continue
            attempt = self.store.latest_attempt(run_id)
            if attempt is None or not row.get("workspace"):
                self.store.set_run_fields(run_id, {"state": "lost", "failure_source": "infra", "ended_at": time.time(),
                                                   "end_reason": "engine died before the agent was recorded"})
                self.store.append_event(run_id, "state", "state → lost: engine died before the agent was recorded",
                                        level="error", data={"state": "lost"})
                continue
            live_containers.add(attempt.get("container_id") or "")
            gpus = attempt.get("gpus") or []
            sup = RunSupervisor(self, RunRecord.from_row(row), list(gpus))
            self.supervisors[run_id] = sup
            sup.adopt(attempt)
        self.store.flush()
        self._reap_orphan_containers(live_containers)
        waiting = [(r["executor"], r.get("gpus_requested"), RunSpec.from_dict(r["spec"]))
                   for r in self.store.runs(["queued"])]
        waiting += [(s.spec.executor_name, s.gpus_requested, s.spec) for s in self.supervisors.values()]
        if waiting:       # queued, and re-adopted runs (their next submission)
            await asyncio.to_thread(self._prestart_grader, waiting)

    def _reap_orphan_containers(self, live: set[str]) -> None:
        """Containers of this home that no live run owns are leftovers of a crash: remove them."""
        from autorl_tui import registry
        from autorl_tui.executors import executor_class

        removed = []
        for name in registry.names("executors"):
            # No probe (e.g. of Docker), not even its module imported, for a home none of whose runs used it.
            if not self.store.any_run_on(name) or not executor_class(name).leaves_leftovers:
                continue
            try:
                removed += self.executor(name).reap_leftovers({c for c in live if c})
            except Exception:
                continue
        for cid in removed:
            self.store.append_event(None, "harness", f"reaped orphan container {cid[:12]}", level="warning")

"""One run, start to end: prepare → baseline → agent (with its grading API and instrumentation)
→ finalize on the held-out split. Every state change is committed before the action it describes.

The supervisor is also the run's `SubmissionDesk`: the grading API hands it submissions."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl_tui.catalog.agents import AgentSpec, find_agent, passthrough_env
from autorl_tui.catalog.tasks import TaskCard, load_task_card
from autorl_tui.engine import autorl_bench_api as abapi
from autorl_tui.engine import events as ev
from autorl_tui.durations import format_duration
from autorl_tui.progress import describe as describe_progress
from autorl_tui.engine.executors.base import AgentHandle, AgentStartError, ExecutorError, LaunchSpec, Mount
from autorl_tui.engine.grading_api import ApiError, GradingServer
from autorl_tui.engine.grading_client import GradingOutcome, run_grader
from autorl_tui.engine.instrument.filetail import FileTail
from autorl_tui.engine.instrument.log_ingest import DEFAULT_MAX_BYTES, DEFAULT_MAX_EVENTS, LogIngest
from autorl_tui.engine.instrument.metrics import MetricsCollector
from autorl_tui.engine.instrument.sessions import SessionTracker
from autorl_tui.engine.instrument.resources import ProcessTreeSampler
from autorl_tui.engine.instrument.revisions import RevisionTracker
from autorl_tui.engine.submissions import (SubmissionRejected, check_model_folder, check_model_path_text,
                                           check_snapshot_size, folder_bytes, resolve_submission_path, snapshot_cap,
                                           snapshot_folder)
from autorl_tui.engine.safe_files import write_replace
from autorl_tui.engine.workspace import AGENT_WRITABLE, Workspace, agent_environment, build_workspace, write_run_meta
from autorl_tui.exitcodes import UsageError
from autorl_tui.grading import GRADER_VERSION
from autorl_tui.store.db import decode_row

if TYPE_CHECKING:
    from autorl_tui.engine.run_host import RunHost

# Grader bounds (docs/grading.md, "Grader bounds").
GRADING_TIMEOUT_S = 3600.0    # any one grading process, at most
GRADING_FLOOR_S = 120.0       # a submission's grading gets at least this...
GRADING_GRACE_S = 60.0        # ...or the run's remaining budget plus this, whichever is longer
TEMPLATE_LIMITS = {"per_prompt_s": 5.0, "total_s": 60.0}   # rendering a submitted chat template

ACTIVE_STATES = ("preparing", "baseline", "running", "paused", "finalizing")
FINAL_STATES = ("done", "failed", "cancelled", "lost")


class RunFailure(Exception):
    def __init__(self, source: str, message: str):
        super().__init__(message)
        self.source = source


class RunCancelled(Exception):
    pass


class RunLost(Exception):
    pass


class InfraRetry(Exception):
    """An infrastructure failure of this attempt: retried as a new attempt after a backoff, while
    the retry policy allows (agent failures are never retried)."""


def model_fingerprint(path: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file():
            st = p.stat()
            h.update(f"{p.relative_to(path)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:12]


class RunSupervisor:
    TAIL_INTERVAL_S = 0.25
    REVISION_INTERVAL_S = 2.0
    RESOURCE_INTERVAL_S = 3.0

    def __init__(self, engine: "RunHost", run: dict, gpus: list[str]):
        self.engine = engine
        self.store = engine.store
        self.run_id: str = run["id"]
        self.run = run
        self.spec: dict = run["spec"]
        self.gpus = gpus
        self.state: str = run["state"]
        self.card: TaskCard | None = None
        self.agent: AgentSpec | None = None
        self.workspace: Workspace | None = None
        self.model_path: Path | None = None
        self.split_paths: dict[str, str] = {}
        self.handle: AgentHandle | None = None
        self.server: GradingServer | None = None
        self.attempt: int = run.get("current_attempt") or 0
        self.deadline: float | None = run.get("deadline")
        self.started_at: float | None = run.get("started_at")
        self._submit_lock = asyncio.Lock()
        self._inflight: set[asyncio.Task] = set()
        self._grading_by_hash: dict[str, asyncio.Task] = {}   # content being graded → its grading
        self._cancel_reason: str | None = None
        self._kill_reason: str | None = None
        self._task: asyncio.Task | None = None
        self._baseline_dev: float | None = run.get("baseline_dev_score")
        self._baseline_grading_s: float | None = None
        self._grading_progress_t = 0.0      # monotonic time of the last grading progress line
        self._adopt_attempt: dict | None = None
        self._base_model_bytes: int | None = None
        self.parser = None
        self._collector: MetricsCollector | None = None

    # ------------------------------------------------------------------ bookkeeping
    def log(self, kind: str, message: str, level: str = "info", data: Any = None) -> None:
        self.store.append_event(self.run_id, kind, message, level=level, data=data, attempt=self.attempt or None)
        self.engine.bus.publish(ev.RunEventAppended(self.run_id, kind=kind, message=message, level=level, data=data))

    def update_run(self, **fields) -> None:
        self.store.update("runs", self.run_id, fields)
        self.run.update(fields)
        self.engine.bus.publish(ev.RunUpdated(self.run_id, fields=fields))

    def transition(self, state: str, reason: str | None = None, failure_source: str | None = None,
                   **fields) -> None:
        previous = self.state
        self.state = state
        fields = {"state": state, **fields}
        if failure_source:
            fields["failure_source"] = failure_source
        if state in FINAL_STATES:
            fields.setdefault("ended_at", time.time())
            fields.setdefault("end_reason", reason)
        self.store.update("runs", self.run_id, fields)
        self.run.update(fields)
        message = f"state {previous} → {state}" + (f": {reason}" if reason else "")
        self.store.append_event(self.run_id, "state", message, level="error" if state in ("failed", "lost") else "info",
                                data={"state": state, "previous": previous, "reason": reason,
                                      "failure_source": failure_source}, attempt=self.attempt or None)
        self.store.flush()
        self.engine.bus.publish(ev.RunStateChanged(self.run_id, state=state, previous=previous, reason=reason,
                                                   failure_source=failure_source))
        extra = {k: v for k, v in fields.items() if k != "state"}
        if extra:
            self.engine.bus.publish(ev.RunUpdated(self.run_id, fields=extra))

    @property
    def task(self) -> asyncio.Task | None:
        """The asyncio task driving this run (None before start/adopt)."""
        return self._task

    # ------------------------------------------------------------------ main flow
    def start(self) -> asyncio.Task:
        self._task = asyncio.create_task(self._execute(), name=f"run-{self.run_id}")
        return self._task

    def adopt(self, attempt_row: dict) -> asyncio.Task:
        self._adopt_attempt = attempt_row
        return self.start()

    async def _execute(self) -> None:
        try:
            if self._adopt_attempt is not None:
                await self._resume_after_restart()
            else:
                await self._prepare()
                await self._baselines()
                await self._run_agent()
            await self._finish()
        except RunLost as exc:
            await self._stop_server(wait_inflight=False)
            self.transition("lost", reason=str(exc), failure_source="infra")
        except InfraRetry as exc:
            await self._wind_down()
            self._retry_or_fail(str(exc))
        except RunCancelled:
            await self._wind_down()
            self.transition("cancelled", reason=self._cancel_reason or "cancelled", failure_source="user")
        except RunFailure as exc:
            await self._wind_down()
            self.transition("failed", reason=str(exc), failure_source=exc.source)
        except asyncio.CancelledError:
            # The engine is shutting down: leave the agent running for the next engine to re-adopt.
            await self._stop_server(wait_inflight=False)
            raise
        except Exception as exc:  # a bug or an unexpected infrastructure error: recorded, never silent
            await self._wind_down()
            self.log("error", f"internal error: {type(exc).__name__}: {exc}", level="error",
                     data={"traceback": traceback.format_exc()})
            self.transition("failed", reason=f"internal error: {type(exc).__name__}: {exc}", failure_source="infra")
        finally:
            self.store.flush()
            self.engine.supervisor_finished(self)

    def _retry_or_fail(self, message: str) -> None:
        from autorl_tui.engine.scheduling import next_retry_delay, should_retry

        policy = self.engine.retry_policy
        if should_retry("infra", self.attempt, policy):
            delay = next_retry_delay(self.attempt, policy)
            self.log("harness", f"attempt {self.attempt} failed ({message}); retrying as attempt {self.attempt + 1} "
                                f"in {delay:.0f}s", level="warning")
            self.transition("queued", reason=f"infrastructure failure, retry in {delay:.0f}s",
                            not_before=time.time() + delay)
        else:
            self.transition("failed", reason=f"{message} (after {self.attempt} attempt(s))", failure_source="infra")

    def _check_cancel(self) -> None:
        if self._cancel_reason:
            raise RunCancelled()

    async def _prepare(self) -> None:
        self.transition("preparing")
        self._load_catalog()
        request = {"task_dir": str(self.card.dir), "model": self.spec["model"], "models_root": str(self.engine.home.models),
                   "cache_root": str(self.engine.home.cache / "tasks"), "splits": ["train", "dev", "test"]}
        out = await self._subprocess_json([sys.executable, "-m", "autorl_tui.engine.prepare_worker", json.dumps(request)])
        if not out.get("ok"):
            raise RunFailure("task" if out.get("kind") == "task" else "infra", out.get("error", "preparation failed"))
        self.model_path = Path(out["model_path"])
        self.split_paths = out["splits"]
        self._check_cancel()
        ws_root = self.engine.home.workspaces / self.run_id
        self.workspace = await asyncio.to_thread(
            build_workspace, ws_root, card=self.card, model_name=self.spec["model_name"], model_path=self.model_path,
            train_path=Path(self.split_paths["train"]),
            link=self.isolated or self.spec.get("executor", "local") != "local")
        self.update_run(workspace=str(ws_root))
        how = ("in a bubblewrap sandbox as a leased unprivileged uid" if self.isolated
               else "UNISOLATED, as the harness user (plan: isolation: none)")
        self.log("harness", f"workspace ready at {ws_root} (agent runs {how})",
                 data={"model_path": str(self.model_path), "isolation": "bwrap" if self.isolated else "none"})

    @property
    def isolated(self) -> bool:
        """Local agents run sandboxed unless the plan said `isolation: none` (then every report says so)."""
        return self.spec.get("isolation", "bwrap") != "none"

    def _load_catalog(self) -> None:
        self.card = load_task_card(Path(self.spec["task"]["dir"]))
        self.agent = find_agent(self.spec["agent"]["name"], [Path(self.spec["agent"]["source"]).parent]
                                + self.engine.agent_search_path())

    async def _subprocess_json(self, argv: list[str]) -> dict:
        """Run a worker; its `{"progress": ...}` lines become `preparing: ...` events as they come,
        its last other JSON line is the result."""
        env = dict(os.environ)
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
        env.setdefault("GOMP_SPINCOUNT", "1000")
        proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                    stdin=asyncio.subprocess.DEVNULL, env=env, limit=2 ** 24)
        stderr_task = asyncio.ensure_future(proc.stderr.read())
        result = None
        async for raw in proc.stdout:
            line = raw.decode(errors="replace").strip()
            if not line.startswith("{"):
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and isinstance(msg.get("progress"), dict):
                p = msg["progress"]
                self.log("harness", f"preparing: {describe_progress(p)}", data={"phase": "prepare", "progress": p})
            else:
                result = msg
        stderr = await stderr_task
        await proc.wait()
        if result is None:
            tail = stderr.decode(errors="replace").strip().splitlines()[-5:]
            return {"ok": False, "kind": "infra",
                    "error": f"{argv[2]} exited with code {proc.returncode}: {' | '.join(tail) or 'no output'}"}
        return result

    # ------------------------------------------------------------------ grading
    def _grading_request(self, model_path: Path, split: str) -> dict:
        options = {**self.card.scorer_options, **self.spec.get("scorer_options", {})}
        if self.card.scorer == "judge":
            # In a folder of its own: the sandboxed grader writes there and nowhere else in the cache.
            options.setdefault("cache_path", str(self.engine.home.cache / "judge" / "judge.sqlite"))
        # Graders get only the environment they need: the judge's key variable (named in the card).
        pass_env = list(options.get("pass_env", [])) + ["AUTORL_JUDGE_URL"]
        if options.get("api_key_env"):
            pass_env.append(options["api_key_env"])
        return {"task": self.card.to_dict(), "split": split, "split_path": self.split_paths[split],
                "model_path": str(model_path), "protocol": self.card.protocol.to_dict(), "scorer": self.card.scorer,
                "scorer_options": options, "backend": self.spec.get("backend", "transformers"),
                "device": "cuda" if self.gpus else "cpu", "threads": self.engine.grader_threads,
                "seed": self.card.protocol.seed, "limit": None, "pass_env": pass_env,
                "template_limits": TEMPLATE_LIMITS}

    def _grading_timeout(self, for_submission: bool) -> float:
        """The grading process's wall-clock limit. A submission's grading ends with the run's budget
        plus a grace, but never gets less than the floor (a submission received just before the
        deadline is still graded): the floor is GRADING_FLOOR_S, or 3x the baseline's dev grading
        time when that is longer (a slow task's honest model must fit)."""
        limit = float(self.spec.get("grading_timeout_s", GRADING_TIMEOUT_S))
        if not for_submission or self.deadline is None:
            return limit
        floor = max(GRADING_FLOOR_S, 3 * (self._baseline_grading_s or 0.0))
        return min(limit, max(floor, self.deadline - time.time() + GRADING_GRACE_S))

    def _grading_progress(self, what: str, category: str, split: str):
        """The grader's progress as log lines: `WHAT: grading 120/200 samples`."""
        def report(done: int, total: int, stage: str) -> None:
            self._grading_progress_t = time.monotonic()
            unit = "episodes" if stage == "episodes" else "samples"
            verb = "scoring" if stage == "scoring" else "grading"
            self.log(category, f"{what}: {verb} {done}/{total} {unit}",
                     data={"phase": "grading", "split": split, "progress": {"done": done, "total": total, "stage": stage}})
        return report

    async def _grade(self, model_path: Path, split: str, work_dir: Path, for_submission: bool = False,
                     gpus: list[str] | None = None, progress_what: str | None = None) -> GradingOutcome:
        """progress_what: the baseline's label; its progress lines are then harness events."""
        async with self.engine.grading_slots:
            timeout = self._grading_timeout(for_submission)
            self.log("grading", f"grading {model_path.name} on {split}",
                     data={"split": split, "phase": "start", "timeout_s": round(timeout, 1)})
            outcome = await run_grader(self._grading_request(model_path, split), work_dir,
                                       gpus=self.gpus if gpus is None else gpus,
                                       threads=self.engine.grader_threads, timeout_s=timeout,
                                       on_progress=self._grading_progress(
                                           progress_what or f"grading {model_path.name} on {split}",
                                           "harness" if progress_what else "grading", split))
            if outcome.ok:
                self.log("grading", f"graded {model_path.name} on {split}: {outcome.score:.2f}",
                         data={"split": split, "phase": "end", "score": outcome.score, "timings": outcome.timings})
            else:
                self.log("grading", f"grading {model_path.name} on {split} failed: {outcome.error}", level="error",
                         data={"split": split, "phase": "end", "error": outcome.error, "kind": outcome.error_kind})
            return outcome

    def _store_samples(self, samples: list[dict], split: str, *, submission_id: int | None = None,
                       baseline_id: int | None = None) -> None:
        rows = [{"run_id": self.run_id if baseline_id is None else None, "submission_id": submission_id,
                 "baseline_id": baseline_id, "split": split, "sample_id": str(s.get("sample_id")),
                 "prompt": s.get("prompt"), "output": s.get("output"), "extracted": s.get("extracted"),
                 "expected": s.get("expected"),
                 "correct": None if s.get("correct") is None else int(bool(s.get("correct"))),
                 "score": s.get("score"), "tokens": s.get("tokens"), "failure_kind": s.get("failure_kind"),
                 "error": s.get("error"), "data": s.get("data")} for s in samples]
        self.store.insert_many("samples", rows)

    async def _baselines(self) -> None:
        self.transition("baseline")
        model_key = f"{self.spec['model_name']}@{model_fingerprint(self.model_path)}"
        scores = {}
        for split in ("dev", "test"):
            self._check_cancel()
            # One computation per baseline key even when several runs of a task start together.
            async with self.engine.baseline_lock((self.card.id, model_key, self.card.protocol_hash(), split)):
                scores[split] = await self._baseline(split, model_key)
        self._baseline_dev = scores["dev"]
        self.update_run(baseline_dev_score=scores["dev"], baseline_score=scores["test"])

    async def _grading_heartbeat(self, what: str, every_s: float = 30.0) -> None:
        """Between the grader's progress lines (loading the model, a slow batch): say it is still
        at work, with the time so far."""
        t0 = time.monotonic()
        while True:
            await asyncio.sleep(every_s)
            if time.monotonic() - self._grading_progress_t < every_s:
                continue
            self.log("harness", f"{what}: still grading, {format_duration(time.monotonic() - t0)} so far",
                     data={"phase": "baseline", "elapsed_s": round(time.monotonic() - t0)})

    async def _baseline(self, split: str, model_key: str) -> float:
        cached = decode_row("baselines", self.store.one(
            "SELECT * FROM baselines WHERE task=? AND model=? AND protocol_hash=? AND grader_version=? AND split=?",
            (self.card.id, model_key, self.card.protocol_hash(), GRADER_VERSION, split)))
        if cached:
            if split == "dev":
                self._baseline_grading_s = ((cached.get("metrics") or {}).get("timings") or {}).get("total_s")
            self.log("harness", f"baseline on {split}: {cached['score']:.2f} (cached)",
                     data={"split": split, "baseline_id": cached["id"], "cached": True})
            return cached["score"]
        work = self.engine.home.run_dir(self.run_id) / "grading" / f"baseline-{split}"
        n = _count_items(self.split_paths.get(split))
        what = f"baseline on {split}: grading the base model on {n if n is not None else 'the'} sample(s)"
        self.log("harness", what, data={"phase": "baseline", "split": split, "progress": {"step": what, "total": n}})
        heartbeat = asyncio.ensure_future(self._grading_heartbeat(what))
        try:
            outcome = await self._grade(self.model_path, split, work, progress_what=f"baseline on {split}")
        finally:
            heartbeat.cancel()
        if not outcome.ok:
            raise RunFailure("grader", f"baseline grading on {split} failed: {outcome.error}")
        if split == "dev":
            self._baseline_grading_s = outcome.wall_s
        if outcome.grader_version and outcome.grader_version != GRADER_VERSION:
            self.log("harness", f"grader reports version {outcome.grader_version}, engine expects {GRADER_VERSION}",
                     level="warning")
        baseline_id = self.store.insert("baselines", {
            "task": self.card.id, "model": model_key, "protocol_hash": self.card.protocol_hash(),
            "grader_version": GRADER_VERSION, "split": split, "score": outcome.score,
            "metrics": {**outcome.metrics, "timings": outcome.timings}, "created_at": time.time()})
        self._store_samples(outcome.samples, split, baseline_id=baseline_id)
        self.log("harness", f"baseline on {split}: {outcome.score:.2f}", data={"split": split, "baseline_id": baseline_id})
        return outcome.score

    # ------------------------------------------------------------------ the agent
    def _command(self) -> str | list[str]:
        # Placeholders are filled by name (other braces, e.g. TOML/JSON in a command, stay as they
        # are) and shell-quoted in a string command: see catalog/agent_command.py.
        from autorl_tui.catalog.agent_command import render_command

        values = {"agent_dir": str(self.agent.agent_dir), "python": sys.executable, "workspace": str(self.workspace.root),
                  "driver": self.spec.get("driver") or "", "driver_url": self.spec.get("options", {}).get("driver_url", ""),
                  "prompt_file": str(self.workspace.root / "prompt.md")}
        try:
            return render_command(self.agent.command, values)
        except UsageError as exc:
            raise RunFailure("agent", f"agent spec {self.agent.source}: {exc}") from None

    def _write_prompt(self, instructions: str) -> None:
        """The prompt every LLM agent gets (one versioned template, docs/agents.md): written to the
        workspace as prompt.md; its text is kept in the store (a blob) and its version on an event.
        Built from the harness's own texts, never read back from the agent-writable workspace."""
        from autorl_tui.catalog.prompts import build_agent_prompt

        root = self.workspace.root
        text, version = build_agent_prompt(self.card.description, instructions,
                                           float(self.run["budget_s"]), task_name=getattr(self.card, "name", None) or self.card.id,
                                           workspace=str(root), deadline=self.deadline)
        write_replace(root, "prompt.md", text.encode(), mode=0o644)
        digest = self.store.put_blob(text.encode())
        self.log("harness", f"agent prompt {version}", data={"prompt_version": version, "prompt_blob": digest})

    def _log_dir(self) -> Path:
        return self.engine.home.run_dir(self.run_id) / f"attempt-{self.attempt}"

    def _launch_spec(self, grading_url: str) -> LaunchSpec:
        passthrough = passthrough_env(self.agent)
        if self.spec.get("driver"):
            passthrough.setdefault("DRIVER_MODEL", self.spec["driver"])
        if self.spec.get("options", {}).get("driver_url"):
            passthrough.setdefault("DRIVER_URL", self.spec["options"]["driver_url"])
        env = agent_environment(self.workspace, task_id=self.card.id, grading_url=grading_url, deadline=self.deadline,
                                seed=int(self.run["seed"]),
                                gpus=self.gpus, passthrough=passthrough,
                                python_bin_dir=str(Path(sys.executable).parent))
        if self.spec.get("executor", "local") == "local":
            # The agent stack's own executables (e.g. an npm global prefix) stay reachable.
            from autorl_tui.catalog.readiness import executable_dirs

            extra = [d for d in executable_dirs(self.agent) if d not in env["PATH"].split(":")]
            if extra:
                env["PATH"] = ":".join(extra + [env["PATH"]])
        limits = self.spec.get("options", {}).get("limits") or {}
        # Containers see the workspace, read-only model and data, and the agent's own program folder.
        mounts = [Mount(self.workspace.model_dir, f"models/{self.workspace.model_name}"),
                  Mount(self.workspace.data, "data"), Mount(self.agent.agent_dir, str(self.agent.agent_dir))]
        return LaunchSpec(mounts=mounts, run_id=self.run_id, attempt=self.attempt, command=self._command(), workspace=self.workspace.root,
                          env=env, log_dir=self._log_dir(), deadline=self.deadline, gpus=list(self.gpus),
                          network=self.agent.network, cpus=limits.get("cpus"), memory_bytes=limits.get("memory_bytes"),
                          image=self.spec.get("options", {}).get("image") or self.agent.image,
                          labels={"autorl.run_id": self.run_id, "autorl.home": str(self.engine.home.root),
                                  "autorl.attempt": str(self.attempt)},
                          grading_socket=self._log_dir() / "api" / "grading.sock",
                          private_paths=self.engine.private_paths(), isolate=self.isolated,
                          writable=AGENT_WRITABLE,
                          placement=dict(self.spec.get("options", {}).get("cluster") or {},
                                         gpus=int(self.run.get("gpus_requested") or 0)))

    async def _start_server(self, token: str | None = None, port: int | None = None) -> None:
        # Containers without a network reach the API through a Unix socket in the harness's log dir.
        sock = self._log_dir() / "api" / "grading.sock" if self.spec.get("executor") == "docker" else None
        if sock is not None:
            sock.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(sock.parent, 0o755)
        # A cluster executor names an address its nodes reach; everything else stays on loopback.
        host = getattr(self.engine.executor(self.spec.get("executor", "local")), "api_host", "127.0.0.1")
        self.server = GradingServer(self, token=token, unix_socket=sock, host=host)
        await self.server.start(port=port or 0)
        if sock is not None:
            os.chmod(sock, 0o666)   # the container's user is not the harness's

    async def _run_agent(self) -> None:
        self._check_cancel()
        executor = self.engine.executor(self.spec.get("executor", "local"))
        self.attempt += 1
        log_dir = self._log_dir()
        log_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(log_dir.parent, 0o700)
        await self._start_server()
        self.started_at = time.time()
        self.deadline = self.started_at + float(self.run["budget_s"])
        instructions = write_run_meta(self.workspace, card=self.card, seed=int(self.run["seed"]),
                                      budget_s=float(self.run["budget_s"]), start=self.started_at, deadline=self.deadline)
        self._mirror_scores()
        self._write_prompt(instructions)
        spec = self._launch_spec(self.server.url)
        # Journal first: the attempt and the run's clock are on disk before the agent exists.
        self.store.insert("attempts", {"run_id": self.run_id, "number": self.attempt, "state": "starting",
                                       "executor": executor.name, "started_at": self.started_at,
                                       "gpus": list(self.gpus), "log_dir": str(log_dir),
                                       "grading_url": self.server.url})
        self.transition("running", current_attempt=self.attempt, started_at=self.started_at, deadline=self.deadline)
        self.log("harness", f"starting agent {self.agent.name} ({executor.name} executor), budget "
                            f"{self.run['budget_s']:.0f}s", data={"command": spec.command, "gpus": self.gpus})
        try:
            self.handle = await executor.start(spec)
        except AgentStartError as exc:
            self._update_attempt(state="failed", error=str(exc), ended_at=time.time())
            raise RunFailure("agent", str(exc)) from None
        except ExecutorError as exc:
            self._update_attempt(state="failed", error=str(exc), ended_at=time.time())
            raise InfraRetry(f"could not start the agent: {exc}") from None
        self._update_attempt(state="running", **self.handle.ident())
        await self._watch_agent(offsets={})

    def _update_attempt(self, **fields) -> None:
        self.store.update_where("attempts", {"run_id": self.run_id, "number": self.attempt}, fields)

    async def _watch_agent(self, offsets: dict) -> None:
        """Tail logs and metrics, snapshot revisions, sample resources, enforce the deadline, until the
        agent ends. Offsets let a restarted engine resume without re-reading or losing lines."""
        handle = self.handle
        out_tail = FileTail(handle.stdout_path, offsets.get("stdout", 0))
        err_tail = FileTail(handle.stderr_path, offsets.get("stderr", 0))
        stored = self.store.one("SELECT COUNT(*) AS n, COALESCE(SUM(LENGTH(message) + COALESCE(LENGTH(data), 0)), 0) AS b "
                                "FROM events WHERE run_id=? AND kind IN ('stdout', 'stderr', 'action')", (self.run_id,))
        cap = self.spec.get("options", {}).get("log_cap") or {}
        metrics = self._metrics_collector(offsets.get("metrics"))
        last_rev = self.store.one("SELECT manifest FROM revisions WHERE run_id=? ORDER BY seq DESC LIMIT 1", (self.run_id,))
        revisions = RevisionTracker(self.workspace.code, last_manifest=json.loads(last_rev["manifest"]) if last_rev else None)
        sampler = ProcessTreeSampler()
        self.parser = self.engine.make_parser(self.agent.output_format)
        ingest = LogIngest(out_tail, err_tail, self.parser, stored_events=stored["n"], stored_bytes=stored["b"],
                           max_events=int(cap.get("events", DEFAULT_MAX_EVENTS)),
                           max_bytes=int(cap.get("bytes", DEFAULT_MAX_BYTES)))
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
                self._pump_batch(batch, ingest, handle)
                self._pump_metrics(points, metrics.take_upgrades())
                for note in notes:
                    self._metrics_note(note)
                # Offsets commit with the rows read up to them (same transaction): resumable, no
                # duplicates. Staged before anything below can commit (a revision insert flushes).
                self.store.stage_update("attempts", {"run_id": self.run_id, "number": self.attempt},
                                        {"offsets": {"stdout": out_tail.offset, "stderr": err_tail.offset,
                                                     "metrics": metrics.offsets()}})
                now = time.time()
                if now >= next_rev or final:
                    next_rev = now + self.REVISION_INTERVAL_S
                    if final or revisions.due(now):
                        await self._snapshot_revision(revisions, "final" if final else "change")
                if now >= next_res and not final:
                    next_res = now + self.RESOURCE_INTERVAL_S
                    self._sample_resources(sampler)
                if final:
                    if ingest.dropped_lines:
                        self.log("harness", f"{ingest.dropped_lines:,} log lines of attempt {self.attempt} were not "
                                            f"stored (over the run's log cap); the full log is in {handle.stdout_path.parent}",
                                 level="warning", data={"dropped_lines": ingest.dropped_lines})
                    break
                if self._cancel_reason and handle.is_alive():
                    await handle.kill(self._cancel_reason)
                elif self._kill_reason and self._kill_reason != "deadline" and handle.is_alive():
                    await handle.kill(self._kill_reason)
                elif self.deadline and now >= self.deadline and handle.is_alive():
                    self._kill_reason = "deadline"
                    self.log("harness", "deadline reached: killing the agent's process tree", level="warning")
                    await handle.kill("deadline")
                if batch.exhausted:
                    await asyncio.wait({wait_task}, timeout=self.TAIL_INTERVAL_S)
                else:
                    await asyncio.sleep(0)      # more is waiting: the next batch, after other work had its turn
        finally:
            if not wait_task.done():
                wait_task.cancel()
        code = wait_task.result()
        info = getattr(handle, "exit_info", lambda: None)() or {}
        reason = info.get("reason") or self._kill_reason or "exited"
        if self._kill_reason:     # the harness's own reason wins over how the executor saw it
            reason = self._kill_reason
        if reason == "node_lost":     # a cluster node went away: an infrastructure failure, retried
            self._update_attempt(state="lost", exit_code=code, error=info.get("error"), ended_at=time.time())
            self.log("harness", f"agent lost: {info.get('error')}", level="error", data={"exit_code": code})
            raise InfraRetry(f"the agent's node was lost: {info.get('error')}")
        self._update_attempt(state="exited" if reason == "exited" else "killed", exit_code=code, ended_at=time.time())
        self.agent_exit = (code, reason)
        self.log("harness", f"agent ended: {reason} (exit code {code})", data={"exit_code": code, "reason": reason})
        # Submissions received before the deadline are graded even if grading finishes after it.
        await self._stop_server(wait_inflight=True)

    @staticmethod
    def _read_logs(ingest: LogIngest, metrics: MetricsCollector, final: bool):
        """In a worker thread: one bounded batch of the agent's output, its metric lines fed on."""
        batch = ingest.read_batch(final)
        metrics.feed_stdout(batch.read)      # transformers prints its log dicts on stdout (or stderr)
        return batch

    def _pump_batch(self, batch, ingest: LogIngest, handle: AgentHandle) -> None:
        if batch.lines or batch.actions:
            # Commit what earlier passes staged (rows + their offsets) so that this batch's rows can
            # never be committed with an older offset by the store's size-triggered flush.
            self.store.flush()
        for stream, line in batch.lines:
            self.log(stream, line, level="info" if stream == "stdout" else "stderr")
        for action, keep in batch.actions:
            self._record_action(action, store=keep)
        if batch.truncated_now:
            self.log("harness", f"log truncated: this run's log cap ({ingest.max_events:,} events or "
                                f"{ingest.max_bytes:,} bytes) is reached; later lines are not stored, the full log "
                                f"is in {handle.stdout_path.parent}", level="warning",
                     data={"max_events": ingest.max_events, "max_bytes": ingest.max_bytes,
                           "log_dir": str(handle.stdout_path.parent)})

    def _record_action(self, action, store: bool = True) -> None:
        data = action.to_dict() if hasattr(action, "to_dict") else dict(action)
        summary = getattr(action, "summary", None)
        message = summary() if callable(summary) else str(data.get("kind"))
        if store:
            self.log("action", message, level="error" if data.get("kind") in ("error", "malformed") else "info",
                     data=data)
        if data.get("kind") == "usage":      # usage actions are increments (engine/instrument/actions.py)
            fields = {col: (self.run.get(col) or 0) + data[col] for col in ("tokens_in", "tokens_out", "cost_usd")
                      if data.get(col) is not None}
            if fields:
                self.update_run(**fields)
                self._check_usage_budgets()

    def _check_usage_budgets(self) -> None:
        """A plan's token and cost budgets end the agent like the wall-clock one does."""
        options = self.spec.get("options", {})
        tokens = (self.run.get("tokens_in") or 0) + (self.run.get("tokens_out") or 0)
        reason = None
        if options.get("token_budget") and tokens > float(options["token_budget"]):
            reason = f"token budget exhausted ({tokens:,} > {int(options['token_budget']):,} tokens)"
        elif options.get("cost_budget") and (self.run.get("cost_usd") or 0) > float(options["cost_budget"]):
            reason = f"cost budget exhausted (${self.run['cost_usd']:.4f} > ${float(options['cost_budget']):.4f})"
        if reason and self._kill_reason is None:
            self._kill_reason = reason
            self.log("harness", f"{reason}: killing the agent's process tree", level="warning")

    def _metrics_collector(self, offsets: dict | None) -> MetricsCollector:
        """The run's metrics collector; after an engine restart its sessions and stored points come
        back from the store, so that nothing is stored twice."""
        run_id, attempt = self.run_id, self.attempt
        tracker = SessionTracker(
            lambda row: self.store.append_session(run_id, attempt=attempt, kind=row["kind"], sources=row["sources"],
                                                  started_at=row["started_at"]),
            lambda sid, fields: self.store.stage_update("training_sessions", {"id": sid}, fields))
        if offsets:
            sessions = [decode_row("training_sessions", r) for r in self.store.query(
                "SELECT * FROM training_sessions WHERE run_id=? AND attempt=?", (run_id, attempt))]
            rows = self.store.query("SELECT id, session_id, name, source, step, ts, value FROM metrics "
                                    "WHERE run_id=? AND session_id IS NOT NULL ORDER BY id", (run_id,))
            tracker.restore(sessions, rows)
        rel = os.path.relpath(self.workspace.metrics_file, self.workspace.root)
        self._collector = MetricsCollector(self.workspace.root, offsets, tracker, metrics_file=rel)
        return self._collector

    def _metrics_note(self, note) -> None:
        """A metrics file the harness would not read is the agent's error, recorded as such; the run goes on."""
        if note.agent_error:
            self.log("error", f"agent error: {note.message}", level="warning",
                     data={"source": "agent", "path": note.path, "problem": note.message})
        else:
            self.log("harness", note.message, level="warning", data={"path": note.path})

    def _pump_metrics(self, points, upgrades=()) -> None:
        for p in points:
            row_id = self.store.append_metric(self.run_id, p.name, p.value, step=p.step, source=p.source,
                                              phase=p.phase, attempt=self.attempt, ts=p.ts,
                                              session_id=getattr(p, "session", None))
            if getattr(p, "key", None) and self._collector is not None:
                self._collector.tracker.stored(p.key, row_id)
        for up in upgrades:       # a better source refined a stored point: same transaction as the offsets
            self.store.stage_update("metrics", {"id": up.row_id}, up.fields)
        # The bus gets at most a few hundred points per tick: a flood must not swamp subscribers.
        for p in points[-500:]:
            self.engine.bus.publish(ev.MetricPoint(self.run_id, name=p.name, value=p.value, step=p.step,
                                                   source=p.source, phase=p.phase, ts=p.ts,
                                                   session=getattr(p, "session", None)))

    async def _snapshot_revision(self, tracker: RevisionTracker, reason: str) -> int | None:
        result = await asyncio.to_thread(tracker.snapshot, self.store.put_blob)
        if result is None:
            row = self.store.one("SELECT id FROM revisions WHERE run_id=? ORDER BY seq DESC LIMIT 1", (self.run_id,))
            return row["id"] if row else None
        manifest, skipped, total = result
        seq = (self.store.one("SELECT COALESCE(MAX(seq), 0) AS n FROM revisions WHERE run_id=?", (self.run_id,))["n"]) + 1
        rev_id = self.store.insert("revisions", {"run_id": self.run_id, "seq": seq, "ts": time.time(), "reason": reason,
                                                 "manifest": manifest, "n_files": len(manifest), "total_bytes": total,
                                                 "skipped": skipped})
        self.log("revision", f"code revision {seq}: {len(manifest)} files ({reason})",
                 data={"revision_id": rev_id, "seq": seq, "files": sorted(manifest)[:50]})
        return rev_id

    def _sample_resources(self, sampler: ProcessTreeSampler) -> None:
        sample = sampler.sample(self.handle.pids() if self.handle else [])
        gpus = self.engine.gpu_samples(self.gpus)
        self.store.append_resource(self.run_id, gpus=gpus, **sample)
        self.engine.bus.publish(ev.ResourceSample(self.run_id, gpus=gpus, **sample))

    async def _stop_server(self, wait_inflight: bool) -> None:
        if wait_inflight and self._inflight:
            await asyncio.gather(*list(self._inflight), return_exceptions=True)
        if self.server is not None:
            await self.server.stop()
            self.server = None

    async def _wind_down(self) -> None:
        """After a failure or cancel: the agent must be dead and the API closed."""
        if self.handle is not None and self.handle.is_alive():
            await self.handle.kill(self._cancel_reason or "run ended")
        await self._stop_server(wait_inflight=not self._cancel_reason)

    # ------------------------------------------------------------------ restart
    async def _resume_after_restart(self) -> None:
        attempt = self._adopt_attempt
        self._load_catalog()
        self.attempt = attempt["number"]
        self.workspace = Workspace(Path(self.run["workspace"]), self.spec["model_name"])
        out = await self._subprocess_json([sys.executable, "-m", "autorl_tui.engine.prepare_worker", json.dumps({
            "task_dir": str(self.card.dir), "model": self.spec["model"], "models_root": str(self.engine.home.models),
            "cache_root": str(self.engine.home.cache / "tasks"), "splits": ["train", "dev", "test"]})])
        if not out.get("ok"):
            raise RunFailure("infra", f"after an engine restart: {out.get('error')}")
        self.model_path, self.split_paths = Path(out["model_path"]), out["splits"]
        executor = self.engine.executor(attempt["executor"])
        log_dir = Path(attempt["log_dir"])
        url = attempt.get("grading_url") or ""
        token, port = url.rsplit("/", 1)[-1], int(url.split(":")[2].split("/")[0]) if url else None
        spec = self._launch_spec(url)
        handle = await executor.adopt(attempt, spec)
        if handle is None:
            self._update_attempt(state="lost", error="agent vanished while the engine was down", ended_at=time.time())
            raise RunLost("the agent's process was gone after an engine restart and left no exit status")
        self.handle = handle
        try:
            await self._start_server(token=token, port=port)
        except OSError as exc:
            self.log("harness", f"could not rebind the grading API on port {port}: {exc}", level="error")
            await self._start_server(token=token)
        self.log("harness", f"re-adopted attempt {self.attempt} after an engine restart",
                 data={"pid": attempt.get("pid"), "container_id": attempt.get("container_id")})
        self._regrade_interrupted()
        if self.state == "paused":
            self.transition("running", reason="resumed after engine restart")
        await self._watch_agent(offsets=attempt.get("offsets") or {})

    def _regrade_interrupted(self) -> None:
        rows = self.store.query("SELECT * FROM submissions WHERE run_id=? AND status IN ('received', 'grading')",
                                (self.run_id,))
        for row in rows:
            if row["snapshot_path"] and Path(row["snapshot_path"]).exists():
                self.log("harness", f"re-grading submission {row['seq']} interrupted by the engine restart")
                task = asyncio.create_task(self._grade_submission(row["id"], Path(row["snapshot_path"]),
                                                                  row["content_hash"], row["seq"]))
                self._inflight.add(task)
                task.add_done_callback(self._inflight.discard)
            else:
                self._set_submission(row["id"], status="error", error="the engine stopped before the snapshot was taken")

    # ------------------------------------------------------------------ end of run
    async def _finish(self) -> None:
        self._check_cancel()
        self.transition("finalizing")
        best = self.store.one("SELECT * FROM submissions WHERE run_id=? AND status='scored' "
                              "ORDER BY score DESC, seq ASC LIMIT 1", (self.run_id,))
        code, reason = getattr(self, "agent_exit", (None, "exited"))
        if best is None:
            why = {"deadline": "the budget ran out", "exited": f"the agent exited (code {code})"}.get(reason, reason)
            source = "budget" if reason == "deadline" or "budget exhausted" in reason else "agent"
            raise RunFailure(source, f"no valid submission: {why} without one")
        test_score = best.get("test_score")
        if test_score is None:
            work = self.engine.home.run_dir(self.run_id) / "grading" / f"test-{best['seq']}"
            outcome = await self._grade(Path(best["snapshot_path"]), "test", work)
            if not outcome.ok:
                raise RunFailure("grader", f"held-out test grading failed: {outcome.error}")
            self.store.query("DELETE FROM samples WHERE submission_id=? AND split='test'", (best["id"],))
            self._store_samples(outcome.samples, "test", submission_id=best["id"])
            test_score = outcome.score
            self._set_submission(best["id"], test_score=test_score)
        baseline = self.run.get("baseline_score")
        improvement = None if baseline is None else test_score - baseline
        end_reason = {"deadline": "deadline reached", "exited": f"agent finished (exit code {code})"}.get(reason, reason)
        self.transition("done", reason=end_reason, test_score=test_score, improvement=improvement,
                        best_submission_id=best["id"], best_dev_score=best["score"])

    # ------------------------------------------------------------------ SubmissionDesk
    def _set_submission(self, sub_id: int, **fields) -> dict:
        self.store.update("submissions", sub_id, fields)
        row = self.store.get("submissions", sub_id)
        self.engine.bus.publish(ev.SubmissionUpdated(self.run_id, submission=row))
        return row

    def _submission_summary(self) -> tuple[dict | None, int]:
        best = self.store.one("SELECT id, seq, score FROM submissions WHERE run_id=? AND status='scored' "
                              "ORDER BY score DESC, seq ASC LIMIT 1", (self.run_id,))
        total = self.store.one("SELECT COUNT(*) AS n FROM submissions WHERE run_id=? AND status IN "
                               "('scored', 'duplicate', 'grading', 'received')", (self.run_id,))["n"]
        return best, total

    def _response(self, row: dict, duplicate: bool = False) -> dict:
        """The answer to a submission: AutoRL-Bench's fields as of `row` (for a duplicate, `row` is the
        earlier submission, so its answer comes back unchanged) plus ours."""
        answer = abapi.response_as_of(self._graded_rows(), row, self._baseline_dev)
        if row["status"] == "scored":
            answer["improvement"] = row["improvement"]
        return {**answer, "duplicate": duplicate, "status": "duplicate" if duplicate else row["status"],
                "run_elapsed_seconds": round(time.time() - (self.started_at or time.time()), 1)}

    def _graded_rows(self) -> list[dict]:
        """The submissions AutoRL-Bench keeps in scores.json: graded, scored or failed."""
        return self.store.query("SELECT seq, path, status, score, error, received_at, graded_at FROM submissions "
                               "WHERE run_id=? AND status IN ('scored', 'error')", (self.run_id,))

    def _failed_answer(self, row: dict, seq: int) -> dict:
        """A failed grading: AutoRL-Bench answers 200 with score 0.0 and `error`; our own contract
        answers 422 `grading_failed` with the same body (docs/autorl-bench.md)."""
        body = {**self._response(row), "code": "grading_failed",
                "error": f"submission {seq} could not be graded: {row['error']}"}
        if getattr(self.agent, "grading_api", "autorl-tui") == "autorl-bench":
            return body
        raise ApiError(422, body.pop("error"), body.pop("code"), body)

    def _mirror_scores(self) -> None:
        if self.workspace is None:
            return
        try:
            abapi.write_scores_mirror(self.workspace.root, self._graded_rows(), self._baseline_dev)
        except OSError as exc:   # the agent owns the folder: a mirror it broke is its loss, never the run's
            self.log("harness", f"scores.json mirror not written: {exc}", level="warning")

    def _check_cap(self, now: float) -> None:
        cap = self.card.submission_cap
        rows = self.store.query("SELECT received_at FROM submissions WHERE run_id=? AND status IN "
                                "('scored', 'grading', 'received', 'error') ORDER BY seq", (self.run_id,))
        if cap.get("max_count") and len(rows) >= int(cap["max_count"]):
            raise ApiError(429, f"submission cap reached: at most {cap['max_count']} submissions in this run", "cap")
        if cap.get("min_interval_s") and rows and now - rows[-1]["received_at"] < float(cap["min_interval_s"]):
            wait = float(cap["min_interval_s"]) - (now - rows[-1]["received_at"])
            raise ApiError(429, f"one submission every {cap['min_interval_s']}s: try again in {wait:.0f}s", "rate",
                           {"retry_after_s": round(wait, 1)})

    async def submit(self, model_path, gpu=None) -> dict:
        """Take a submission in, grade it (or join the grading of identical content) and answer.

        Nothing is recorded for a request that cannot name a folder (checked first). Once its row is
        written, every outcome moves it to a terminal state: `rejected` when intake refuses it or
        fails (not counted against the cap), `scored`/`error` once graded, `duplicate` when its
        content was already graded (or is being graded: it then waits for that result)."""
        now = time.time()
        if self.state not in ("running", "paused") or self.deadline is None:
            raise ApiError(409, f"the run is {self.state}: submissions are closed", "closed")
        if now > self.deadline:
            raise ApiError(409, "the budget is exhausted: submissions after the deadline are not graded", "deadline")
        check_model_path_text(model_path)
        try:
            grading_gpus = abapi.choose_gpus(gpu, list(self.gpus))
        except abapi.GpuRefused as exc:
            raise ApiError(400, str(exc), exc.code, {"available_gpus": exc.available}) from None
        async with self._submit_lock:
            self._check_cap(now)
            seq = self.store.one("SELECT COALESCE(MAX(seq), 0) AS n FROM submissions WHERE run_id=?",
                                 (self.run_id,))["n"] + 1
            sub_id = self.store.insert("submissions", {"run_id": self.run_id, "attempt": self.attempt, "seq": seq,
                                                       "path": model_path[:1000], "received_at": now,
                                                       "status": "received"})
            self.log("submission", f"submission {seq} received: {model_path[:300]}",
                     data={"submission_id": sub_id, "seq": seq})
            try:
                snap, rev_id = await self._intake(model_path, seq)
            except SubmissionRejected as exc:
                self._set_submission(sub_id, status="rejected", error=str(exc))
                self.log("submission", f"submission {seq} rejected: {exc}", level="warning",
                         data={"submission_id": sub_id, "code": exc.code})
                raise
            except BaseException as exc:   # a harness fault (or shutdown): never a row left in `received`
                self._set_submission(sub_id, status="rejected",
                                     error=f"the harness could not take it in ({type(exc).__name__}: {exc}); "
                                           f"not counted against the cap")
                self.log("error", f"submission {seq}: intake failed: {type(exc).__name__}: {exc}", level="error",
                         data={"submission_id": sub_id, "traceback": traceback.format_exc()})
                raise
            self._set_submission(sub_id, snapshot_path=str(snap.path), content_hash=snap.content_hash,
                                 revision_id=rev_id, status="grading")
            earlier = self.store.one("SELECT * FROM submissions WHERE run_id=? AND content_hash=? AND status='scored' "
                                     "AND id != ? ORDER BY seq LIMIT 1", (self.run_id, snap.content_hash, sub_id))
            if earlier:
                return self._mark_duplicate(sub_id, seq, earlier)
            task = self._grading_by_hash.get(snap.content_hash)
            if task is None:
                task = asyncio.create_task(self._grade_submission(sub_id, snap.path, snap.content_hash, seq,
                                                                  grading_gpus))
                self._inflight.add(task)
                self._grading_by_hash[snap.content_hash] = task
                task.add_done_callback(self._inflight.discard)
                task.add_done_callback(lambda t, h=snap.content_hash: self._grading_by_hash.pop(h, None))
                first = None
            else:
                first = task
        row = await asyncio.shield(task)
        if first is not None:          # identical content submitted while it was being graded: one grading
            if row["status"] == "scored":
                return self._mark_duplicate(sub_id, seq, row)
            row = self._set_submission(sub_id, status="error", duplicate_of=row["id"], graded_at=time.time(),
                                       error=f"same content as submission {row['seq']}, which could not be graded: "
                                             f"{row['error']}")
        if row["status"] == "error":
            return self._failed_answer(row, seq)
        return self._response(row)

    async def _intake(self, model_path: str, seq: int) -> tuple[Any, int | None]:
        """Resolve, check, measure and snapshot the folder; the code revision it was submitted with."""
        try:
            real = resolve_submission_path(self.workspace.root, model_path)
            check_model_folder(real)
            base_bytes, cap, factor = self._snapshot_cap()
            await asyncio.to_thread(check_snapshot_size, real, cap, base_bytes, factor)
            snap = await asyncio.to_thread(snapshot_folder, real,
                                           self.engine.home.snapshots / self.run_id / f"{seq:03d}", cap)
        except (OSError, RuntimeError) as exc:    # unreadable files, name too long, a symlink loop, ...
            raise SubmissionRejected(f"cannot read {model_path[:300]!r}: {exc}: make the folder and its files "
                                     f"readable regular files (no symlink loops, names under 255 bytes)",
                                     "unreadable") from None
        tracker = RevisionTracker(self.workspace.code, last_manifest=self._last_manifest())
        return snap, await self._snapshot_revision(tracker, "submission")

    def _snapshot_cap(self) -> tuple[int, int, float | None]:
        """(base model bytes, snapshot cap, size factor): the cap is relative to the base model's size
        (harness-owned files, measured once per supervisor)."""
        if self._base_model_bytes is None:
            self._base_model_bytes = folder_bytes(self.workspace.model_dir)[0]
        factor = self.card.submission_cap.get("size_factor")
        return self._base_model_bytes, snapshot_cap(self._base_model_bytes, factor), factor

    def _mark_duplicate(self, sub_id: int, seq: int, earlier: dict) -> dict:
        row = self._set_submission(sub_id, status="duplicate", duplicate_of=earlier["id"], score=earlier["score"],
                                   improvement=earlier["improvement"], graded_at=time.time())
        self.log("submission", f"submission {seq} has the same content as submission {earlier['seq']}: "
                               f"returning its result", data={"submission_id": sub_id, "duplicate_of": earlier["id"]})
        return {**self._response(earlier, duplicate=True), "duplicate_of": earlier["seq"]}

    def _last_manifest(self) -> dict | None:
        row = self.store.one("SELECT manifest FROM revisions WHERE run_id=? ORDER BY seq DESC LIMIT 1", (self.run_id,))
        return json.loads(row["manifest"]) if row else None

    async def _grade_submission(self, sub_id: int, snapshot: Path, content_hash: str, seq: int,
                                gpus: list[str] | None = None) -> dict:
        """Grade and record; whatever happens, the submission ends `scored` or `error`."""
        try:
            return await self._grade_and_record(sub_id, snapshot, seq, gpus)
        except Exception as exc:  # noqa: BLE001 - recorded against this submission, never the run
            self.log("error", f"submission {seq}: grading failed in the harness: {type(exc).__name__}: {exc}",
                     level="error", data={"submission_id": sub_id, "traceback": traceback.format_exc()})
            row = self.store.get("submissions", sub_id)
            if row["status"] == "scored":
                return row
            return self._set_submission(sub_id, status="error", graded_at=time.time(),
                                        error=f"the harness failed while grading it ({type(exc).__name__}: {exc})")
        finally:
            self._mirror_scores()

    async def _grade_and_record(self, sub_id: int, snapshot: Path, seq: int, gpus: list[str] | None = None) -> dict:
        work = self.engine.home.run_dir(self.run_id) / "grading" / f"submission-{seq:03d}"
        outcome = await self._grade(snapshot, "dev", work, for_submission=True, gpus=gpus)
        if not outcome.ok:
            return self._set_submission(sub_id, status="error", error=outcome.error, graded_at=time.time(),
                                        grading_s=outcome.wall_s)
        self._store_samples(outcome.samples, "dev", submission_id=sub_id)
        improvement = None if self._baseline_dev is None else outcome.score - self._baseline_dev
        row = self._set_submission(sub_id, status="scored", score=outcome.score, improvement=improvement,
                                   metrics=outcome.metrics, graded_at=time.time(),
                                   inference_s=outcome.timings.get("inference_s"), grading_s=outcome.wall_s)
        self.store.append_metric(self.run_id, "dev_score", outcome.score, step=seq, source="grading", attempt=self.attempt)
        self.engine.bus.publish(ev.MetricPoint(self.run_id, name="dev_score", value=outcome.score, step=seq,
                                               source="grading"))
        best, _ = self._submission_summary()
        if best and best["id"] == sub_id:
            self.update_run(best_dev_score=outcome.score, best_submission_id=sub_id,
                            dev_improvement=improvement)
        self.log("submission", f"submission {seq} scored {outcome.score:.2f} on dev"
                               + (f" ({improvement:+.2f} vs baseline)" if improvement is not None else ""),
                 data={"submission_id": sub_id, "score": outcome.score, "improvement": improvement})
        write_run_meta(self.workspace, card=self.card, seed=int(self.run["seed"]), budget_s=float(self.run["budget_s"]), start=self.started_at,
                       deadline=self.deadline, last_submit_time=time.time())
        return row

    def time_info(self) -> dict:
        """Ours (deadline, remaining_seconds, ...) and AutoRL-Bench's run_meta fields with `now` and
        `remaining`, from the run's own clock (never from run_meta.json, which the agent could replace)."""
        now = time.time()
        last = self.store.one("SELECT MAX(graded_at) AS t FROM submissions WHERE run_id=? AND status IN "
                              "('scored', 'error')", (self.run_id,))["t"]
        return {"deadline": self.deadline, "remaining_seconds": max(0.0, (self.deadline or now) - now),
                "budget_seconds": self.run["budget_s"], "state": self.state,
                **abapi.time_fields(start=self.started_at, budget_s=float(self.run["budget_s"]),
                                    deadline=self.deadline, last_submit=last, end=self.run.get("ended_at"))}

    def submissions_info(self) -> list[dict]:
        rows = self.store.query("SELECT seq, path, status, score, improvement, error, received_at, graded_at, "
                                "content_hash FROM submissions WHERE run_id=? ORDER BY seq", (self.run_id,))
        return [{"submission_id": r.pop("seq"), **r} for r in rows]

    def health_info(self) -> dict:
        return {"ok": True, "status": "ok", "run_id": self.run_id, "task": self.card.id if self.card else None,
                "state": self.state, "workspace": str(self.workspace.root) if self.workspace else None,
                "available_gpus": list(self.gpus)}

    # ------------------------------------------------------------------ operator commands
    async def cancel(self, reason: str) -> None:
        self._cancel_reason = reason
        if self.handle is not None and self.handle.is_alive():
            await self.handle.kill(reason)

    async def pause(self) -> None:
        if self.state != "running" or self.handle is None:
            raise ValueError(f"run {self.run_id} is {self.state}: only a running agent can be paused")
        await self.handle.pause()
        self.transition("paused", reason="paused by operator (the budget clock keeps running)")

    async def resume(self) -> None:
        if self.state != "paused" or self.handle is None:
            raise ValueError(f"run {self.run_id} is {self.state}: only a paused run can be resumed")
        await self.handle.resume()
        self.transition("running", reason="resumed by operator")

    async def extend(self, seconds: float) -> None:
        if self.deadline is None or self.handle is None:
            self.update_run(budget_s=float(self.run["budget_s"]) + seconds)
            return
        self.deadline += seconds
        await self.handle.extend_deadline(self.deadline)
        self.update_run(deadline=self.deadline, budget_s=float(self.run["budget_s"]) + seconds)
        write_run_meta(self.workspace, card=self.card, seed=int(self.run["seed"]), budget_s=float(self.run["budget_s"]), start=self.started_at,
                       deadline=self.deadline)
        self.log("harness", f"budget extended by {seconds:.0f}s", data={"deadline": self.deadline})


def _count_items(path: str | None) -> int | None:
    """Items in a materialized .jsonl split (None for folder splits)."""
    if not path or not str(path).endswith(".jsonl"):
        return None
    try:
        with open(path, "rb") as fh:
            return sum(1 for line in fh if line.strip())
    except OSError:
        return None

"""One run, start to end: its state machine and budget. prepare → baseline → agent (with its
per-run API and a watch over it) → finalize on the held-out split. Every state change is committed
before the action it describes (run_journal.py).

The jobs it delegates: grading and baselines (run_grading.py), the submission desk behind the
per-run API (submission_desk.py, run_api.py), watching the agent and enforcing its budgets
(agent_watch.py), the held-out finalization (finalization.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from autorl_tui.catalog.agents import AgentSpec, find_agent, passthrough_env
from autorl_tui.catalog.overlays import overlay_env, place_copies, place_home_files
from autorl_tui.catalog.tasks import TaskCard, load_task_card
from autorl_tui.executors.agent_runtime import AgentRuntimeMissing
from autorl_tui.executors.agent_runtime import find as find_agent_runtime
from autorl_tui.catalog.plans import host_ports_of
from autorl_tui.engine import honey_tokens, trust_sweep
from autorl_tui.engine.agent_watch import AgentWatch
from autorl_tui.executors.base import (AgentHandle, AgentStartError, ClusterLaunch, ContainerLaunch, Executor,
                                              ExecutorError, LaunchSpec, Mount, SandboxLaunch)
from autorl_tui.engine.finalization import finalize
from autorl_tui.engine.run_api import RunApiServer
from autorl_tui.engine.run_grading import RunGrading
from autorl_tui.engine.run_journal import RunJournal
from autorl_tui.engine.run_outcomes import InfraRetry, RunCancelled, RunFailure, RunLost
from autorl_tui.safe_files import write_replace
from autorl_tui.engine.submission_desk import SubmissionDesk
from autorl_tui.engine.workspace import AGENT_WRITABLE, Workspace, agent_environment, build_workspace, write_run_meta
from autorl_tui.exitcodes import UsageError
from autorl_tui.progress import describe as describe_progress
from autorl_tui.store.records import RunRecord
from autorl_tui.store.run_spec import RunSpec

if TYPE_CHECKING:
    from autorl_tui.engine.run_host import RunHost
    from autorl_tui.store.engine_records import AttemptRow


class RunSupervisor:
    def __init__(self, engine: "RunHost", run: RunRecord, gpus: list[str]):
        self.engine = engine
        self.store = engine.store
        self.run_id: str = run.id
        self.spec: RunSpec = run.spec
        self.gpus = gpus
        self.gpus_requested = int(run.gpus_requested or 0)
        self.journal = RunJournal(engine.store, engine.bus, run)
        self.grading = RunGrading(self.journal, engine, self.spec, gpus)
        self.grading.agent_where = self._agent_where
        self.card: TaskCard | None = None
        self.agent: AgentSpec | None = None
        self.workspace: Workspace | None = None
        self.model_path: Path | None = None
        self.handle: AgentHandle | None = None
        self.server: RunApiServer | None = None
        self.desk: SubmissionDesk | None = None
        self.agent_exit: tuple[int | None, str] = (None, "exited")
        self._cancel_reason: str | None = None
        self._task: asyncio.Task | None = None
        self._phase: asyncio.Task | None = None        # preparing or baselines: what a cancel interrupts
        self._adopt_attempt: "AttemptRow | None" = None

    # ------------------------------------------------------------------ the run's live state
    @property
    def state(self) -> str:
        return self.journal.state

    @property
    def deadline(self) -> float | None:
        return self.journal.deadline

    @property
    def attempt(self) -> int:
        return self.journal.attempt

    @property
    def task(self) -> asyncio.Task | None:
        """The asyncio task driving this run (None before start/adopt)."""
        return self._task

    @property
    def executor_name(self) -> str:
        return self.spec.executor_name

    @property
    def executor(self) -> "Executor":
        return self.engine.executor(self.executor_name)

    @property
    def isolated(self) -> bool:
        """Local agents run sandboxed unless the plan said `isolation: none` (then every report says so)."""
        return self.spec.isolated

    def log(self, kind: str, message: str, level: str = "info", data=None) -> None:
        self.journal.log(kind, message, level=level, data=data)

    # ------------------------------------------------------------------ main flow
    def start(self) -> asyncio.Task:
        self._task = asyncio.create_task(self._execute(), name=f"run-{self.run_id}")
        return self._task

    def adopt(self, attempt_row: "AttemptRow") -> asyncio.Task:
        self._adopt_attempt = attempt_row
        return self.start()

    async def _execute(self) -> None:
        transition = self.journal.transition
        try:
            if self._adopt_attempt is not None:
                await self._resume_after_restart()
            else:
                await self._interruptible(self._prepare())
                await self._interruptible(self._baselines())
                await self._run_agent()
            await self._finish()
        except RunLost as exc:
            await self._stop_server(wait_inflight=False)
            transition("lost", reason=str(exc), failure_source="infra")
        except InfraRetry as exc:
            await self._wind_down()
            self._retry_or_fail(str(exc))
        except RunCancelled:
            await self._wind_down()
            transition("cancelled", reason=self._cancel_reason or "cancelled", failure_source="user")
        except RunFailure as exc:
            await self._wind_down()
            transition("failed", reason=str(exc), failure_source=exc.source)
        except asyncio.CancelledError:
            # The engine is shutting down: leave the agent running for the next engine to re-adopt.
            await self._stop_server(wait_inflight=False)
            raise
        except Exception as exc:  # a bug or an unexpected infrastructure error: recorded, never silent
            await self._wind_down()
            self.log("error", f"internal error: {type(exc).__name__}: {exc}", level="error",
                     data={"traceback": traceback.format_exc()})
            transition("failed", reason=f"internal error: {type(exc).__name__}: {exc}", failure_source="infra")
        finally:
            self.store.flush()
            self.engine.supervisor_finished(self)

    def _retry_or_fail(self, message: str) -> None:
        from autorl_tui.engine.scheduling import next_retry_delay, should_retry

        policy, attempt = self.engine.retry_policy, self.attempt
        if should_retry("infra", attempt, policy):
            delay = next_retry_delay(attempt, policy)
            self.log("harness", f"attempt {attempt} failed ({message}); retrying as attempt {attempt + 1} "
                                f"in {delay:.0f}s", level="warning")
            self.journal.transition("queued", reason=f"infrastructure failure, retry in {delay:.0f}s",
                                    not_before=time.time() + delay)
        else:
            self.journal.transition("failed", reason=f"{message} (after {attempt} attempt(s))", failure_source="infra")

    def _check_cancel(self) -> None:
        if self._cancel_reason:
            raise RunCancelled()

    async def _interruptible(self, phase) -> None:
        """Run a phase before the agent (preparing, baselines) so that a cancel stops it at once:
        the worker it waits on (the prepare worker, a baseline grading) is killed with it."""
        self._phase = asyncio.ensure_future(phase)
        try:
            await self._phase
        except asyncio.CancelledError:
            if self._cancel_reason and not asyncio.current_task().cancelling():
                raise RunCancelled() from None
            raise                                   # the engine is shutting down
        finally:
            self._phase = None
        self._check_cancel()

    async def _prepare(self) -> None:
        self.journal.transition("preparing")
        self._load_catalog()
        await asyncio.to_thread(self.grading.prestart, self.card)
        out = await self._materialize()
        if not out.get("ok"):
            raise RunFailure("task" if out.get("kind") == "task" else "infra", out.get("error", "preparation failed"))
        self._prepared(out)
        self._check_cancel()
        ws_root = self.engine.home.workspaces / self.run_id
        self.workspace = await asyncio.to_thread(
            build_workspace, ws_root, card=self.card, model_name=self.spec.model_name, model_path=self.model_path,
            train_path=Path(self.grading.split_paths["train"]),
            link=self.isolated or not self.executor.on_this_host)
        self.journal.update_run(workspace=str(ws_root))
        honey_tokens.plant(self.engine.home.run_dir(self.run_id), ws_root, self.run_id)
        in_container = self.executor.runs_in_container(self.spec.options)
        how = ("in a container, as an unprivileged user" if in_container
               else "in a bubblewrap sandbox as a leased unprivileged uid" if self.isolated
               else "UNISOLATED, as the harness user (plan: isolation: none)")
        self.log("harness", f"workspace ready at {ws_root} (agent runs {how})",
                 data={"model_path": str(self.model_path),
                       "isolation": "container" if in_container else "bwrap" if self.isolated else "none"})

    def _load_catalog(self) -> None:
        self.card = load_task_card(Path(self.spec.task["dir"]), self.spec.task.get("protocol_name"),
                                   data_home=self.engine.home.data)
        self.agent = find_agent(self.spec.agent["name"], [Path(self.spec.agent["source"]).parent]
                                + self.engine.agent_search_path())

    async def _materialize(self) -> dict:
        """The base model and the task's splits, materialized by the prepare worker."""
        request = {"task_dir": str(self.card.dir), "protocol": self.card.protocol_name,
                   "data_home": str(self.engine.home.data), "model": self.spec.model, "models_root": str(self.engine.home.models),
                   "cache_root": str(self.engine.home.cache / "tasks"), "splits": ["train", "dev", "test"]}
        return await self._subprocess_json([sys.executable, "-m", "autorl_tui.engine.prepare_worker", json.dumps(request)])

    def _prepared(self, out: dict) -> None:
        self.model_path = Path(out["model_path"])
        self.grading.prepared(self.card, out["splits"])

    async def _subprocess_json(self, argv: list[str]) -> dict:
        """Run a worker; its `{"progress": ...}` lines become `preparing: ...` events as they come,
        its last other JSON line is the result."""
        env = dict(os.environ)
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
        env.setdefault("GOMP_SPINCOUNT", "1000")
        proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                    stdin=asyncio.subprocess.DEVNULL, env=env, limit=2 ** 24,
                                                    start_new_session=True)
        stderr_task = asyncio.ensure_future(proc.stderr.read())
        result = None
        try:
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
        finally:
            if proc.returncode is None:     # cancelled: the worker and whatever it started end now
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                stderr_task.cancel()
                await proc.wait()
        if result is None:
            tail = stderr.decode(errors="replace").strip().splitlines()[-5:]
            return {"ok": False, "kind": "infra",
                    "error": f"{argv[2]} exited with code {proc.returncode}: {' | '.join(tail) or 'no output'}"}
        return result

    async def _baselines(self) -> None:
        self.journal.transition("baseline")
        await self.grading.baselines(self.model_path, self.spec.model_name, self._check_cancel)

    # ------------------------------------------------------------------ the agent
    def _command(self) -> str | list[str]:
        # Placeholders are filled by name (other braces, e.g. TOML/JSON in a command, stay as they
        # are) and shell-quoted in a string command: see catalog/agent_command.py.
        from autorl_tui.catalog.agent_command import render_command

        values = {"agent_dir": str(self.agent.agent_dir), "python": self._agent_python(), "workspace": str(self.workspace.root),
                  "driver": self.spec.driver or "", "driver_url": self.spec.option("driver_url", ""),
                  "prompt_file": str(self.workspace.root / "prompt.md")}
        try:
            return render_command(self.agent.command, values)
        except UsageError as exc:
            raise RunFailure("agent", f"agent spec {self.agent.source}: {exc}") from None

    def _image(self) -> str | None:
        return self.spec.option("image") or self.agent.image

    def _agent_python(self) -> str:
        """`{python}`: the agent runtime's interpreter (executors/agent_runtime.py), or a named image's python3."""
        if self._image() and self.executor.takes_images:
            return "python3"
        try:
            return str(find_agent_runtime().python)
        except AgentRuntimeMissing as exc:
            raise RunFailure("infra", str(exc)) from None

    def _write_prompt(self, instructions: str) -> None:
        """The prompt every LLM agent gets (one versioned template, docs/agents.md): written to the
        workspace as prompt.md; its text is kept in the store (a blob) and its version on an event.
        Built from the harness's own texts, never read back from the agent-writable workspace."""
        from autorl_tui.catalog.prompts import build_agent_prompt

        root = self.workspace.root
        text, version = build_agent_prompt(self.card.description, instructions,
                                           self.journal.budget_s, task_name=getattr(self.card, "name", None) or self.card.id,
                                           workspace=str(root), deadline=self.deadline)
        write_replace(root, "prompt.md", text.encode(), mode=0o644)
        digest = self.store.put_blob(text.encode())
        self.log("harness", f"agent prompt {version}", data={"prompt_version": version, "prompt_blob": digest})

    def _log_dir(self) -> Path:
        return self.engine.home.run_dir(self.run_id) / f"attempt-{self.attempt}"

    def _launch_spec(self, grading_url: str) -> LaunchSpec:
        overlay = self.spec.option("overlay", {})
        given = overlay_env(overlay, os.environ)
        copies = place_copies(overlay, self.workspace.root / ".home")
        passthrough = {**passthrough_env(self.agent), **given, **copies}
        placed = place_home_files(overlay, self.workspace.root / ".home")
        if overlay:
            from_file = sorted(set(given) - set(overlay.get("env") or []))     # names only: values may be keys
            self.log("harness", "operator overlay: " + "; ".join(filter(None, [
                overlay.get("env") and "variables " + ", ".join(overlay["env"]),
                from_file and f"variables from {overlay['env_file']}: " + ", ".join(from_file),
                placed and "home files " + ", ".join(placed),
                overlay.get("binds") and "read-only folders " + ", ".join(overlay["binds"]),
                copies and "private copies " + ", ".join(f"{v}={p} (of {overlay['copies'][v]})"
                                                          for v, p in copies.items())])),
                data={"overlay": {"env": overlay.get("env") or [], "env_file": overlay.get("env_file"),
                                  "env_file_names": from_file, "home_files": placed,
                                  "binds": overlay.get("binds") or [], "copies": copies}})
        if self.spec.driver:
            passthrough.setdefault("DRIVER_MODEL", self.spec.driver)
        if self.spec.option("driver_url"):
            passthrough.setdefault("DRIVER_URL", self.spec.option("driver_url"))
        env = agent_environment(self.workspace, task_id=self.card.id, grading_url=grading_url, deadline=self.deadline,
                                seed=self.journal.seed,
                                gpus=self.gpus, passthrough=passthrough,
                                python_bin_dir=os.path.dirname(self._agent_python()) or "/usr/local/bin")
        if self.executor.on_this_host:
            # The agent stack's own executables (e.g. an npm global prefix) stay reachable.
            from autorl_tui.catalog.readiness import executable_dirs

            extra = [d for d in executable_dirs(self.agent) if d not in env["PATH"].split(":")]
            if extra:
                env["PATH"] = ":".join(extra + [env["PATH"]])
        limits = self.spec.option("limits", {})
        # Containers see the workspace, read-only model and data, and the agent's own program folder.
        mounts = [Mount(self.workspace.model_dir, f"models/{self.workspace.model_name}"),
                  Mount(self.workspace.data, "data"), Mount(self.agent.agent_dir, str(self.agent.agent_dir))]
        mounts += [Mount(Path(b), b) for b in overlay.get("binds") or []]     # the operator's checkouts, read-only
        return LaunchSpec(mounts=mounts, run_id=self.run_id, attempt=self.attempt, command=self._command(), workspace=self.workspace.root,
                          env=env, log_dir=self._log_dir(), deadline=self.deadline, gpus=list(self.gpus),
                          network=self.agent.network, cpus=limits.get("cpus"), memory_bytes=limits.get("memory_bytes"),
                          labels={"autorl.run_id": self.run_id, "autorl.home": str(self.engine.home.root),
                                  "autorl.attempt": str(self.attempt)},
                          writable=AGENT_WRITABLE,
                          log_file_bytes=self.spec.option("log_cap", {}).get("file_bytes"),
                          sandbox=SandboxLaunch(private_paths=self.engine.private_paths(), isolate=self.isolated,
                                                host_ports=host_ports_of(self.spec.options)),
                          container=ContainerLaunch(image=self._image(),
                                                    grading_socket=self._log_dir() / "api" / "grading.sock"),
                          cluster=ClusterLaunch(placement=dict(self.spec.option("cluster", {}),
                                                               gpus=self.gpus_requested)))

    async def _start_server(self, token: str | None = None, port: int | None = None) -> None:
        """The submission desk and its per-run API. Containers without a network reach the API
        through a Unix socket in the harness's log dir."""
        if self.desk is None:
            self.desk = SubmissionDesk(self.journal, self.grading, self.engine.home, workspace=self.workspace,
                                       card=self.card, agent=self.agent, gpus=self.gpus)
        sock = self._log_dir() / "api" / "grading.sock" if self.executor.grading_over_socket else None
        if sock is not None:
            sock.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(sock.parent, 0o755)
        # A cluster executor names an address its nodes reach; everything else stays on loopback.
        host = self.executor.api_host
        self.server = RunApiServer(self.desk, token=token, unix_socket=sock, host=host)
        await self.server.start(port=port or 0)
        if sock is not None:
            os.chmod(sock, 0o666)   # the container's user is not the harness's

    async def _run_agent(self) -> None:
        self._check_cancel()
        journal = self.journal
        executor = self.executor
        journal.attempt += 1
        log_dir = self._log_dir()
        log_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(log_dir.parent, 0o700)
        await self._start_server()
        journal.started_at = time.time()
        journal.deadline = journal.started_at + journal.budget_s
        instructions = write_run_meta(self.workspace, card=self.card, seed=journal.seed, budget_s=journal.budget_s,
                                      start=journal.started_at, deadline=journal.deadline)
        self.desk.mirror_scores()
        self._write_prompt(instructions)
        spec = self._launch_spec(self.server.url)
        # Journal first: the attempt and the run's clock are on disk before the agent exists.
        self.store.add_attempt({"run_id": self.run_id, "number": self.attempt, "state": "starting",
                                "executor": executor.name, "started_at": journal.started_at,
                                "gpus": list(self.gpus), "log_dir": str(log_dir), "grading_url": self.server.url})
        journal.transition("running", current_attempt=self.attempt, started_at=journal.started_at,
                           deadline=journal.deadline)
        self.log("harness", f"starting agent {self.agent.name} ({executor.name} executor), budget "
                            f"{journal.budget_s:.0f}s", data={"command": spec.command, "gpus": self.gpus})
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

    def _agent_where(self) -> dict | None:
        """executor ray: the node and GPUs Ray gave the agent (ray.json), and whether it still runs."""
        where = getattr(self.handle, "where", None)
        return {**where, "alive": self.handle.is_alive()} if where else None

    def _update_attempt(self, **fields) -> None:
        self.store.update_attempt(self.run_id, self.attempt, fields)

    async def _watch_agent(self, offsets: dict) -> None:
        """Until the agent ends; then the API closes once the gradings under way are recorded."""
        watch = AgentWatch(self.journal, self.engine, self.handle, workspace=self.workspace, agent=self.agent,
                           spec=self.spec, gpus=self.gpus, cancel_reason=lambda: self._cancel_reason)
        async with honey_tokens.watching(self.journal, self.engine.home.run_dir(self.run_id)):
            self.agent_exit = await watch.run(offsets)
        # Submissions received before the deadline are graded even if grading finishes after it.
        await self._stop_server(wait_inflight=True)

    async def _stop_server(self, wait_inflight: bool) -> None:
        if wait_inflight and self.desk is not None:
            await self.desk.wait_gradings()
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
        self.journal.attempt = attempt["number"]
        self.workspace = Workspace(Path(self.journal.run.workspace), self.spec.model_name)
        out = await self._materialize()
        if not out.get("ok"):
            raise RunFailure("infra", f"after an engine restart: {out.get('error')}")
        self._prepared(out)
        executor = self.engine.executor(attempt["executor"])
        url = attempt.get("grading_url") or ""
        token, port = url.rsplit("/", 1)[-1], int(url.split(":")[2].split("/")[0]) if url else None
        spec = self._launch_spec(url)
        handle = await executor.adopt(attempt, spec)
        if handle is None:
            self._update_attempt(state="lost", error="agent vanished while the engine was down", ended_at=time.time())
            raise RunLost("the agent's process was gone after an engine restart and left no exit status")
        self.handle = handle       # its cluster unreachable (`handle.waiting`), its watch says so and waits
        try:
            await self._start_server(token=token, port=port)
        except OSError as exc:
            self.log("harness", f"could not rebind the grading API on port {port}: {exc}", level="error")
            await self._start_server(token=token)
        self.log("harness", f"re-adopted attempt {self.attempt} after an engine restart",
                 data={"pid": attempt.get("pid"), "container_id": attempt.get("container_id")})
        self.desk.regrade_interrupted()
        if self.state == "paused":
            self.journal.transition("running", reason="resumed after engine restart")
        await self._watch_agent(offsets=attempt.get("offsets") or {})

    # ------------------------------------------------------------------ end of run
    async def _finish(self) -> None:
        self._check_cancel()
        self.journal.transition("finalizing")
        await trust_sweep.sweep(self.journal, self.grading.split_paths, self.workspace and self.workspace.root,
                                self.engine.private_paths())
        result = await finalize(self.journal, self.grading, self.engine.home, self.agent_exit)
        self.journal.transition("done", reason=result.reason, **result.fields)

    # ------------------------------------------------------------------ operator commands
    async def cancel(self, reason: str) -> None:
        self._cancel_reason = reason
        self.log("operator", f"cancel requested in state {self.state}: {reason}",
                 data={"action": "cancel", "state": self.state, "reason": reason})
        if self._phase is not None:
            self._phase.cancel()
        if self.handle is not None and self.handle.is_alive():
            await self.handle.kill(reason)

    async def pause(self) -> None:
        if self.state != "running" or self.handle is None:
            raise ValueError(f"run {self.run_id} is {self.state}: only a running agent can be paused")
        await self.handle.pause()
        self.journal.transition("paused", reason="paused by operator (the budget clock keeps running)")

    async def resume(self) -> None:
        if self.state != "paused" or self.handle is None:
            raise ValueError(f"run {self.run_id} is {self.state}: only a paused run can be resumed")
        await self.handle.resume()
        self.journal.transition("running", reason="resumed by operator")

    async def extend(self, seconds: float) -> None:
        journal = self.journal
        if journal.deadline is None or self.handle is None:
            journal.update_run(budget_s=journal.budget_s + seconds)
            return
        journal.deadline += seconds
        await self.handle.extend_deadline(journal.deadline)
        journal.update_run(deadline=journal.deadline, budget_s=journal.budget_s + seconds)
        write_run_meta(self.workspace, card=self.card, seed=journal.seed, budget_s=journal.budget_s,
                       start=journal.started_at, deadline=journal.deadline)
        self.log("harness", f"budget extended by {seconds:.0f}s", data={"deadline": journal.deadline})

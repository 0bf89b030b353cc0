"""The engine's Unix-socket server: how a detached engine is driven by consoles and scripts.

Protocol: newline-delimited JSON on `home.socket_path` (mode 0600, so only the owner can drive
the engine).

    request   {"id": 7, "cmd": "cancel", "args": {"run_id": "r0001-..."}}
    response  {"id": 7, "ok": true, "result": ...}
              {"id": 7, "ok": false, "error": "what is wrong", "error_type": "usage|infra|internal"}
    events    {"event": EngineEvent.to_dict()}        after a `subscribe` on that connection
              {"lagged": N}                           N events were dropped: re-read `snapshot`

Responses and events share the connection and keep their order: an event written before a
response happened before the command's answer was computed. `run_history` relies on that (it
sends the connection's queued events first, then reads the store), so a console that loads a
run's history and then applies live events sees every line exactly once.

Commands map one to one onto the Engine API (docs/ARCHITECTURE.md, "Engine API"), plus
`ping`, `status`, `snapshot`, `run_history`, `catalog`, `subscribe` and `shutdown`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import os
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

from autorl_tui import __version__
from autorl_tui.engine.events import RunStateChanged, RunUpdated
from autorl_tui.run_states import ACTIVE_STATES
from autorl_tui.daemon.run_summaries import summary_page
from autorl_tui.exitcodes import InfraError, UsageError

log = logging.getLogger(__name__)

# One JSON line may carry a whole run history; asyncio's default 64 KiB line limit is too small.
LINE_LIMIT = 256 * 1024 * 1024
HISTORY_EVENTS_DEFAULT = 5000


@dataclass
class CatalogSources:
    """Where this engine finds tasks, agents and models (what the New-plan screen offers)."""
    home_root: Path
    agents_dirs: list[Path] = field(default_factory=list)
    tasks_dirs: list[Path] = field(default_factory=list)
    gpus: list[str] = field(default_factory=list)   # device ids this engine schedules on
    concurrency: int | None = None


def _dumps(obj: Any) -> bytes:
    return (json.dumps(obj, default=str, separators=(",", ":")) + "\n").encode()


class _Connection:
    def __init__(self, server: "EngineServer", reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.server = server
        self.reader = reader
        self.writer = writer
        self.subscription = None
        self.forwarder: asyncio.Task | None = None

    def send(self, message: dict) -> None:
        if not self.writer.is_closing():
            self.writer.write(_dumps(message))

    def send_event(self, event) -> None:
        self.send({"event": event.to_dict()})
        if isinstance(event, RunStateChanged) and event.run_id:
            # A transition also changes summary fields (started_at, deadline, ended_at, end_reason,
            # attempt) that the state event does not carry: follow it with the row as it is now.
            row = self.server.run_summary(event.run_id)
            if row is not None:
                self.send({"event": RunUpdated(event.run_id, fields=row, ts=event.ts).to_dict()})

    def flush_subscription(self) -> None:
        """Write the events queued for this connection now (see `run_history`)."""
        if self.subscription is None:
            return
        for event in self.subscription.drain():
            self.send_event(event)
        self._report_lag()

    def _report_lag(self) -> None:
        sub = self.subscription
        if sub is not None and sub.lagged:
            self.send({"lagged": sub.dropped})
            sub.lagged = False
            sub.dropped = 0

    async def forward_events(self) -> None:
        sub = self.subscription
        while True:
            event = await sub.get()
            self.send_event(event)
            # Write everything already queued in one go, then let the socket drain.
            for more in sub.drain():
                self.send_event(more)
            self._report_lag()
            await self.writer.drain()

    def close(self) -> None:
        if self.forwarder is not None:
            self.forwarder.cancel()
        if self.subscription is not None:
            self.subscription.close()
            self.subscription = None
        self.writer.close()


class EngineServer:
    def __init__(self, engine, socket_path: str | os.PathLike, *, catalog: CatalogSources | None = None,
                 on_shutdown: Callable[[bool], Awaitable[None] | None] | None = None,
                 subscription_size: int = 200_000):
        self.engine = engine
        self.socket_path = Path(socket_path)
        self.catalog_sources = catalog
        self.on_shutdown = on_shutdown
        self.subscription_size = subscription_size
        self.started_at = time.time()
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[_Connection] = set()
        self._handlers: dict[str, Callable[[dict], Any]] = {
            name.removeprefix("cmd_"): getattr(self, name) for name in dir(self) if name.startswith("cmd_")}

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Bind the socket. Call after the engine holds the home lock: a leftover socket file
        from a dead engine is then safe to remove."""
        path = self.socket_path
        if len(str(path).encode()) > 107:
            raise InfraError(f"socket path {path} is too long for a Unix socket (max 107 bytes): "
                             f"use a shorter --home")
        if path.exists() or path.is_symlink():
            path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)   # created 0600: no window in which others could connect
        try:
            sock.bind(str(path))
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)
        sock.listen(64)
        sock.setblocking(False)
        self._server = await asyncio.start_unix_server(self._handle, sock=sock, limit=LINE_LIMIT)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            conn.close()
        self._connections.clear()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2)
            except asyncio.TimeoutError:
                pass
            self._server = None
        try:
            self.socket_path.unlink()
        except FileNotFoundError:
            pass

    # ------------------------------------------------------------------ connection loop
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Connection(self, reader, writer)
        self._connections.add(conn)
        try:
            while True:
                try:
                    line = await reader.readline()
                except (ConnectionError, asyncio.LimitOverrunError, ValueError):
                    break
                if not line:
                    break
                if not line.strip():
                    continue
                await self._dispatch(conn, line)
                try:
                    await writer.drain()
                except ConnectionError:
                    break
        finally:
            conn.close()
            self._connections.discard(conn)

    async def _dispatch(self, conn: _Connection, line: bytes) -> None:
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("not an object")
        except ValueError:
            conn.send({"id": None, "ok": False, "error_type": "usage",
                       "error": 'request is not a JSON object: send {"id": 1, "cmd": "ping", "args": {}}'})
            return
        req_id = request.get("id")
        cmd = request.get("cmd")
        args = request.get("args") or {}
        handler = self._handlers.get(cmd) if isinstance(cmd, str) else None
        if handler is None:
            conn.send({"id": req_id, "ok": False, "error_type": "usage",
                       "error": f"unknown command {cmd!r}; known: {', '.join(sorted(self._handlers))}"})
            return
        if not isinstance(args, dict):
            conn.send({"id": req_id, "ok": False, "error_type": "usage", "error": "`args` must be an object"})
            return
        try:
            inspect.signature(handler).bind(conn, **args)
        except TypeError as exc:
            conn.send({"id": req_id, "ok": False, "error_type": "usage", "error": f"{cmd}: bad arguments: {exc}"})
            return
        try:
            result = handler(conn, **args)
            if asyncio.iscoroutine(result):
                result = await result
        except UsageError as exc:
            conn.send({"id": req_id, "ok": False, "error_type": "usage", "error": str(exc)})
        except (KeyError, LookupError) as exc:
            conn.send({"id": req_id, "ok": False, "error_type": "usage", "error": f"{cmd}: {exc}"})
        except InfraError as exc:
            conn.send({"id": req_id, "ok": False, "error_type": "infra", "error": str(exc)})
        except Exception as exc:  # the engine keeps serving; the caller gets the reason
            log.error("command %s failed:\n%s", cmd, traceback.format_exc())
            conn.send({"id": req_id, "ok": False, "error_type": "internal", "error": f"{cmd}: {exc}"})
        else:
            # Events the command caused are delivered before its answer.
            conn.flush_subscription()
            conn.send({"id": req_id, "ok": True, "result": result})

    def run_summary(self, run_id: str) -> dict | None:
        store = getattr(self.engine, "store", None)
        if store is None:
            return None
        row = store.run(run_id)
        if row is not None:
            row.pop("spec", None)
        return row

    # ------------------------------------------------------------------ informational commands
    def _run_counts(self) -> dict:
        runs = self.engine.runs()
        counts: dict[str, int] = {}
        for r in runs:
            counts[r["state"]] = counts.get(r["state"], 0) + 1
        return {"active": sum(counts.get(s, 0) for s in ACTIVE_STATES), "queued": counts.get("queued", 0),
                "by_state": counts, "total": len(runs)}

    def cmd_ping(self, conn) -> dict:
        return {"pid": os.getpid(), "started_at": self.started_at, "version": __version__,
                "home": str(self.catalog_sources.home_root) if self.catalog_sources else None,
                "role": getattr(self.engine, "role", "engine")}

    def cmd_status(self, conn) -> dict:
        return {**self.cmd_ping(conn), "uptime_s": time.time() - self.started_at,
                "queue_paused": bool(getattr(self.engine, "queue_paused", False)),
                "clients": len(self._connections), **self._run_counts()}

    def cmd_snapshot(self, conn, page_size: int | None = None, after: list | None = None,
                     known: dict | None = None, known_hash: str | None = None) -> dict:
        """Current state: run summaries (newest first; no spec), queue state, GPUs. Consistent with
        the event stream on this connection (queued events are written before the answer). Paged
        with `page_size` (`next` is the cursor to pass as `after`); with `known` (run id -> the
        digest the caller holds) only the runs that changed are sent; with `known_hash` (one hash of
        the page the caller holds) no run, or `digests_needed` (daemon/run_summaries.py)."""
        conn.flush_subscription()
        try:
            page = summary_page(self.engine.store, page_size=page_size, after=after, known=known,
                                known_hash=known_hash)
        except ValueError as exc:
            raise UsageError(f"snapshot: {exc}") from None
        return {**page, "queue_paused": bool(getattr(self.engine, "queue_paused", False)),
                "gpus": self.gpu_inventory(), "now": time.time(), "engine": self.cmd_ping(conn)}

    def gpu_inventory(self) -> dict:
        """Devices this engine schedules on, and the active attempt holding each; the Ray cluster's."""
        devices = [str(d) for d in (self.catalog_sources.gpus if self.catalog_sources else [])]
        holders: dict[str, str] = {}
        for holder in self.engine.store.gpu_holders(ACTIVE_STATES):
            for dev in holder.gpus:
                holders[dev] = holder.run_id
        concurrency = self.catalog_sources.concurrency if self.catalog_sources else None
        cluster = getattr(self.engine, "cluster_state", None)      # executor ray: its nodes and holdings
        return {"devices": devices, "holders": holders, "cpu_slots": concurrency,
                "cluster": cluster() if cluster else None}

    def cmd_run_history(self, conn, run_id: str, events_limit: int = HISTORY_EVENTS_DEFAULT,
                        metrics_limit: int = 20000) -> dict:
        """Everything recorded for one run (the last `events_limit` events). Events queued for
        this connection are written before the store is read, so live events that follow the
        answer are exactly those not in it."""
        conn.flush_subscription()
        store = self.engine.store
        store.flush()
        run = store.run(run_id)
        if run is None:
            raise UsageError(f"no run {run_id!r} in this home")
        return {"run": run, "events": store.events_tail(run_id, events_limit), "events_total": store.count_events(run_id),
                "metrics": store.metrics_tail(run_id, metrics_limit), "submissions": [s.to_dict() for s in store.submissions(run_id)],
                "revisions": store.revision_list(run_id), "resources": store.last_resource_sample(run_id)}

    def cmd_revisions(self, conn, run_id: str) -> list[dict]:
        """A run's code revisions (metadata; file contents are blobs in the store)."""
        self.engine.store.flush()
        return self.engine.store.revision_list(run_id)

    def cmd_catalog(self, conn) -> dict:
        """Tasks, agents and models this engine can run (for the New-plan screen)."""
        from autorl_tui.catalog.agents import agent_search_path, list_agents
        from autorl_tui.catalog.models import builtin_models, is_hf_model_dir
        from autorl_tui import registry
        from autorl_tui.catalog.tasks import list_tasks, task_search_path

        src = self.catalog_sources
        home_root = src.home_root if src else None
        tasks = list_tasks(task_search_path(src.tasks_dirs if src else [], home_root))
        agents = list_agents(agent_search_path(src.agents_dirs if src else [], home_root))
        models = builtin_models()
        if home_root is not None and (home_root / "models").is_dir():
            for d in sorted((home_root / "models").iterdir()):
                if d.name not in models and is_hf_model_dir(d):
                    models.append(d.name)
        return {
            "tasks": [{"id": t.id, "name": t.name, "level": t.level, "default_budget": t.default_budget}
                      for t in tasks.values()],
            "agents": [{"name": a.name, "description": a.description} for a in agents.values()],
            "models": models, "executors": registry.names("executors"),
            "gpus": [str(g) for g in (src.gpus if src else [])],
        }

    # ------------------------------------------------------------------ streaming
    def cmd_subscribe(self, conn) -> dict:
        if conn.subscription is None:
            conn.subscription = self.engine.bus.subscribe(maxsize=self.subscription_size)
            conn.forwarder = asyncio.get_running_loop().create_task(conn.forward_events())
        return {"subscribed": True}

    def cmd_unsubscribe(self, conn) -> dict:
        if conn.forwarder is not None:
            conn.forwarder.cancel()
            conn.forwarder = None
        if conn.subscription is not None:
            conn.subscription.close()
            conn.subscription = None
        return {"subscribed": False}

    # ------------------------------------------------------------------ Engine API commands
    async def cmd_enqueue_plan(self, conn, text: str, where: str = "<console>") -> dict:
        from autorl_tui.catalog.plans import parse_plan

        plan = parse_plan(text, where)
        run_ids = await self.engine.enqueue_plan(plan)
        return {"run_ids": list(run_ids), "plan": plan.name}

    async def cmd_cancel(self, conn, run_id: str, reason: str = "cancelled by user") -> None:
        await self.engine.cancel(run_id, reason=reason)

    async def cmd_pause(self, conn, run_id: str) -> None:
        await self.engine.pause(run_id)

    async def cmd_resume(self, conn, run_id: str) -> None:
        await self.engine.resume(run_id)

    async def cmd_extend_budget(self, conn, run_id: str, seconds: float) -> None:
        if not isinstance(seconds, (int, float)) or seconds <= 0:
            raise UsageError(f"extend_budget: seconds must be a positive number, got {seconds!r}")
        await self.engine.extend_budget(run_id, float(seconds))

    async def cmd_retry(self, conn, run_id: str) -> dict:
        return {"run_id": await self.engine.retry(run_id)}

    async def cmd_move_to_front(self, conn, run_id: str) -> None:
        await self.engine.move_to_front(run_id)

    async def cmd_set_priority(self, conn, run_id: str, priority: int) -> None:
        await self.engine.set_priority(run_id, int(priority))

    async def cmd_pause_queue(self, conn) -> None:
        await self.engine.pause_queue()

    async def cmd_resume_queue(self, conn) -> None:
        await self.engine.resume_queue()

    async def cmd_drain(self, conn) -> None:
        await self.engine.drain()

    async def cmd_shutdown(self, conn, cancel_runs: bool = False) -> dict:
        """Stop the engine process after answering. Runs are left to the engine's stop semantics
        (re-adopted by the next engine) unless `cancel_runs`."""
        if self.on_shutdown is None:
            role = getattr(self.engine, "role", "batch")
            raise UsageError(f"this engine runs inside `autorl-tui {'--batch' if role == 'batch' else role}` "
                             f"(pid {os.getpid()}): stop that command with Ctrl-C (or `kill -INT {os.getpid()}`)")
        loop = asyncio.get_running_loop()

        def trigger():
            result = self.on_shutdown(bool(cancel_runs))
            if asyncio.iscoroutine(result):
                loop.create_task(result)

        loop.call_soon(trigger)   # after the answer is written
        return {"stopping": True, "pid": os.getpid(), "cancel_runs": bool(cancel_runs)}


@contextlib.asynccontextmanager
async def serving(engine):
    """The socket server for an engine that runs in a command's own process (`--batch`, `demo`,
    `retry`, `cancel`): a console attaches to it and `engine status` sees it while it runs. It
    cannot be stopped over the socket (Ctrl-C the command). A socket that cannot be bound only
    costs the watching, so it is a warning."""
    sources = CatalogSources(home_root=engine.home.root, agents_dirs=list(engine.agents_dirs),
                             tasks_dirs=list(engine.tasks_dirs), gpus=list(engine.gpu_inventory),
                             concurrency=engine.concurrency)
    server: EngineServer | None = EngineServer(engine, engine.home.socket_path, catalog=sources)
    try:
        await server.start()
    except (OSError, InfraError) as exc:
        print(f"autorl-tui: warning: the console cannot attach to this run ({exc})", file=sys.stderr)
        server = None
    try:
        yield server
    finally:
        if server is not None:
            await server.close()

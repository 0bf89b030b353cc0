"""Async client of a detached engine (see `server.py` for the protocol).

    client = await EngineClient.connect(home)
    await client.subscribe()
    rows = (await client.snapshot())["runs"]
    async for item in client.events():     # EngineEvent, or Lagged / Disconnected markers
        ...

Every Engine API command is a method; a command the engine refuses raises `EngineCommandError`
(a UsageError: the message says what is wrong). No engine on the socket raises `EngineNotRunning`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator

from autorl_tui.engine.events import EngineEvent, event_from_dict
from autorl_tui.daemon.run_summaries import page_hash
from autorl_tui.exitcodes import InfraError, UsageError

LINE_LIMIT = 256 * 1024 * 1024


class EngineNotRunning(InfraError):
    pass


class EngineCommandError(UsageError):
    def __init__(self, message: str, error_type: str = "usage"):
        super().__init__(message)
        self.error_type = error_type


@dataclass
class Lagged:
    """The engine dropped `dropped` events for this client: re-read the snapshot."""
    dropped: int


@dataclass
class Disconnected:
    """The engine closed the connection (stopped, or crashed)."""
    reason: str


def socket_path_of(home) -> Path:
    if hasattr(home, "socket_path"):
        return Path(home.socket_path)
    return Path(home) / "engine.sock"


def not_running_message(home_root: Path) -> str:
    return (f"no engine is running for home {home_root}: start one with "
            f"`autorl-tui --home {home_root} engine start` (or just run `autorl-tui --home {home_root}`)")


def decode_lines(lines: list[bytes]) -> list:
    """The JSON values of complete lines, decoded in one call as one array (a flood of events
    costs one decoder call per chunk read, not one per line); a bad line raises ValueError."""
    lines = [line for line in lines if line]
    if not lines:
        return []
    try:
        return json.loads(b"[" + b",".join(lines) + b"]")
    except ValueError:
        return [json.loads(line) for line in lines]     # raises for the line that is not JSON


class EngineClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, socket_path: Path):
        self._reader = reader
        self._writer = writer
        self.socket_path = socket_path
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._events: deque = deque()
        self._has_events = asyncio.Event()
        self.closed = False
        # Events received so far; each event gets its number as `recv_seq`, and `run_history`
        # reports `as_of_seq`: events numbered after it are not in the history.
        self.received = 0
        self.close_reason: str | None = None
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def connect(cls, home, timeout: float = 5.0) -> "EngineClient":
        path = socket_path_of(home)
        home_root = path.parent
        if not path.exists():
            raise EngineNotRunning(not_running_message(home_root))
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(str(path), limit=LINE_LIMIT), timeout)
        except (ConnectionRefusedError, FileNotFoundError, asyncio.TimeoutError):
            raise EngineNotRunning(not_running_message(home_root) + " (the socket is left over from an engine that stopped)") from None
        except PermissionError:
            raise EngineNotRunning(f"the engine socket {path} belongs to another user: "
                                   f"use your own --home") from None
        return cls(reader, writer, path)

    # ------------------------------------------------------------------ plumbing
    async def _read_loop(self) -> None:
        reason = "the engine closed the connection"
        pending: list[bytes] = []   # the start of a line not complete yet (a big answer spans chunks)
        try:
            while True:
                # Read whatever arrived (up to 64 KiB, a few hundred events) and handle its complete
                # lines in one go: a flood costs one wake-up per chunk, not per line, and no chunk
                # holds the event loop long enough to delay a key press.
                chunk = await self._reader.read(1 << 16)
                if not chunk:
                    break
                if b"\n" not in chunk:
                    pending.append(chunk)
                    continue
                *lines, rest = b"".join((*pending, chunk)).split(b"\n")
                pending = [rest] if rest else []
                for msg in decode_lines(lines):
                    self._handle(msg)
                self._wake_event_waiters()
        except (ConnectionError, ValueError) as exc:
            reason = f"connection to the engine lost: {exc}"
        except asyncio.CancelledError:
            reason = "client closed"
            raise
        finally:
            self.closed = True
            self.close_reason = reason
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(EngineNotRunning(reason))
            self._pending.clear()
            self._events.append(Disconnected(reason))
            self._wake_event_waiters()

    def _handle(self, msg: dict) -> None:
        if "event" in msg:
            self.received += 1
            event = event_from_dict(msg["event"])
            event.recv_seq = self.received
            self._events.append(event)
        elif "lagged" in msg:
            self._events.append(Lagged(int(msg["lagged"])))
        else:
            msg["_recv_seq"] = self.received
            fut = self._pending.pop(msg.get("id"), None)
            if fut is not None and not fut.done():
                fut.set_result(msg)

    def _wake_event_waiters(self) -> None:
        if self._events and not self._has_events.is_set():
            self._has_events.set()

    async def call(self, cmd: str, **args: Any) -> Any:
        return (await self._call(cmd, args)).get("result")

    async def _call(self, cmd: str, args: dict) -> dict:
        if self.closed:
            raise EngineNotRunning(self.close_reason or "not connected")
        req_id = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[req_id] = fut
        self._writer.write((json.dumps({"id": req_id, "cmd": cmd, "args": args}, default=str) + "\n").encode())
        try:
            await self._writer.drain()
        except ConnectionError as exc:
            self._pending.pop(req_id, None)
            raise EngineNotRunning(f"connection to the engine lost: {exc}") from None
        msg = await fut
        if msg.get("ok"):
            return msg
        error_type = msg.get("error_type", "usage")
        if error_type == "infra":
            raise InfraError(msg.get("error", "engine error"))
        raise EngineCommandError(msg.get("error", "engine error"), error_type)

    async def close(self) -> None:
        if not self._read_task.done():
            self._read_task.cancel()
            try:
                await self._read_task
            except asyncio.CancelledError:
                pass
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    # ------------------------------------------------------------------ events
    async def subscribe(self) -> None:
        await self.call("subscribe")

    async def events(self) -> AsyncIterator[EngineEvent | Lagged | Disconnected]:
        """Live events (after `subscribe`). Ends after yielding `Disconnected`."""
        while True:
            while not self._events:
                self._has_events.clear()
                await self._has_events.wait()
            item = self._events.popleft()
            yield item
            if isinstance(item, Disconnected):
                return

    @property
    def backlog(self) -> int:
        return len(self._events)

    def discard_backlog(self) -> int:
        """Forget the events received but not yet taken (the caller re-reads the state instead)."""
        n = len(self._events)
        self._events.clear()
        return n

    def drain_events(self, limit: int | None = None) -> list:
        """Events received so far, without waiting (the console applies them in batches)."""
        if limit is None or limit >= len(self._events):
            out = list(self._events)
            self._events.clear()
            return out
        return [self._events.popleft() for _ in range(limit)]

    # ------------------------------------------------------------------ commands
    async def ping(self) -> dict:
        return await self.call("ping")

    async def status(self) -> dict:
        return await self.call("status")

    async def snapshot(self, *, page_size: int | None = None, after: list | None = None,
                       known: dict[str, str] | None = None, known_hash: str | None = None) -> dict:
        """Run summaries (no spec), queue state, GPUs; one page with `page_size`; only the runs
        whose digest differs from `known` (daemon/run_summaries.py)."""
        args: dict[str, Any] = {}
        if page_size is not None:
            args["page_size"] = page_size
        if after is not None:
            args["after"] = after
        if known:
            args["known"] = known
        if known_hash is not None:
            args["known_hash"] = known_hash
        page = await self.call("snapshot", **args)
        # The wire names the columns once and sends each run as a list of values (a third of the
        # bytes of a dict per run); callers get one dict per run.
        columns, rows = page.pop("columns", None), page.pop("rows", None)
        if columns is not None and rows is not None:
            page["runs"] = [dict(zip(columns, row)) for row in rows]
        return page

    async def snapshot_pages(self, page_size: int,
                             known: dict[str, tuple[float, str]] | None = None) -> AsyncIterator[dict]:
        """Every page of the snapshot, newest runs first. `known`: run id -> (created_at, digest) of
        the rows the caller holds. A page is asked for with one hash of the caller's next page_size
        rows after the cursor (run_summaries.page_hash): unchanged, nothing more is sent either
        way. Otherwise it is asked again with the digests of the rows that can fall in that page
        (the next page and a half, in the same order) and comes back with only what changed: a
        re-read of 10,000 runs of which a few changed sends 20 hashes and a page of digests."""
        keys = sorted(((created, rid) for rid, (created, _) in (known or {}).items()), reverse=True)
        pos, after = 0, None
        while True:
            if after is not None:
                cursor = (after[0], after[1])
                while pos < len(keys) and keys[pos] >= cursor:
                    pos += 1
            page = None
            if known:
                held = [(rid, known[rid][1]) for _, rid in keys[pos:pos + page_size]]
                page = await self.snapshot(page_size=page_size, after=after, known_hash=page_hash(held))
            if page is None or page.get("digests_needed"):
                window = {rid: known[rid][1] for _, rid in keys[pos:pos + page_size + page_size // 2]} if known else None
                page = await self.snapshot(page_size=page_size, after=after, known=window)
            yield page
            after = page.get("next")
            if after is None:
                return

    async def run_history(self, run_id: str, events_limit: int = 5000) -> dict:
        msg = await self._call("run_history", {"run_id": run_id, "events_limit": events_limit})
        return {**msg["result"], "as_of_seq": msg["_recv_seq"]}

    async def revisions(self, run_id: str) -> list[dict]:
        return await self.call("revisions", run_id=run_id)

    async def catalog(self) -> dict:
        return await self.call("catalog")

    async def enqueue_plan(self, text: str, where: str = "<console>") -> list[str]:
        return (await self.call("enqueue_plan", text=text, where=where))["run_ids"]

    async def cancel(self, run_id: str, reason: str = "cancelled by user") -> None:
        await self.call("cancel", run_id=run_id, reason=reason)

    async def pause(self, run_id: str) -> None:
        await self.call("pause", run_id=run_id)

    async def resume(self, run_id: str) -> None:
        await self.call("resume", run_id=run_id)

    async def extend_budget(self, run_id: str, seconds: float) -> None:
        await self.call("extend_budget", run_id=run_id, seconds=seconds)

    async def retry(self, run_id: str) -> str:
        return (await self.call("retry", run_id=run_id))["run_id"]

    async def move_to_front(self, run_id: str) -> None:
        await self.call("move_to_front", run_id=run_id)

    async def set_priority(self, run_id: str, priority: int) -> None:
        await self.call("set_priority", run_id=run_id, priority=priority)

    async def pause_queue(self) -> None:
        await self.call("pause_queue")

    async def resume_queue(self) -> None:
        await self.call("resume_queue")

    async def drain(self) -> None:
        await self.call("drain")

    async def shutdown(self, cancel_runs: bool = False) -> dict:
        return await self.call("shutdown", cancel_runs=cancel_runs)


def engine_is_running(home, timeout: float = 2.0) -> dict | None:
    """Blocking check for scripts and the CLI: the engine's `ping` answer, or None."""
    path = socket_path_of(home)
    if not path.exists():
        return None

    async def _ping():
        client = await EngineClient.connect(home, timeout=timeout)
        try:
            return await asyncio.wait_for(client.ping(), timeout)
        finally:
            await client.close()

    try:
        return asyncio.run(_ping())
    except (EngineNotRunning, InfraError, OSError, asyncio.TimeoutError):
        return None


__all__ = ["EngineClient", "EngineNotRunning", "EngineCommandError", "Lagged", "Disconnected",
           "engine_is_running", "socket_path_of"]

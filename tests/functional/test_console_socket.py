"""The engine's socket protocol (server.py + client.py) over a real Unix socket. The engine
behind it here is the store-only StaticEngine (fixed data, publishes real events); the live
behaviour with the real Engine is in test_console_live.py."""

import asyncio
import os
import socket
import stat
import subprocess
import sys

import pytest

from autorl_tui.daemon.client import EngineClient, EngineCommandError, EngineNotRunning, Lagged
from autorl_tui.engine.events import RunEventAppended
from autorl_tui.daemon.server import CatalogSources, EngineServer
from autorl_tui.home import Home
from tests.support.static_engine import StaticEngine, fill_demo_store

RID = "r0002-arith-scripted-s0"


@pytest.fixture
async def served(tmp_path):
    home = Home.open(str(tmp_path / "h"))
    engine = StaticEngine(home)
    fill_demo_store(engine.store)
    stops = []
    server = EngineServer(engine, home.socket_path, catalog=CatalogSources(home_root=home.root),
                          on_shutdown=stops.append, subscription_size=50)
    await server.start()
    yield home, engine, server, stops
    await server.close()
    engine.store.close()


async def test_socket_is_private_and_answers(served):
    home, engine, server, _ = served
    assert stat.S_IMODE(os.stat(home.socket_path).st_mode) == 0o600
    async with await EngineClient.connect(home) as client:
        ping = await client.ping()
        assert ping["pid"] == os.getpid()
        status = await client.status()
        assert (status["active"], status["queued"], status["total"]) == (1, 1, 3)


async def test_no_engine_gives_a_clear_error(tmp_path):
    home = Home.open(str(tmp_path / "h"))
    with pytest.raises(EngineNotRunning, match="no engine is running for home .*engine start"):
        await EngineClient.connect(home)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(home.socket_path))    # a socket file nobody listens on (engine died)
    stale.close()
    with pytest.raises(EngineNotRunning, match="left over"):
        await EngineClient.connect(home)


async def test_bad_requests_are_refused_with_reasons(served):
    home, *_ = served
    async with await EngineClient.connect(home) as client:
        with pytest.raises(EngineCommandError, match="unknown command 'frobnicate'"):
            await client.call("frobnicate")
        with pytest.raises(EngineCommandError, match="bad arguments"):
            await client.call("cancel", run="x")
        with pytest.raises(EngineCommandError, match="no run 'r9999'"):
            await client.cancel("r9999")
        with pytest.raises(EngineCommandError, match="seconds must be a positive number"):
            await client.extend_budget(RID, -5)
        with pytest.raises(EngineCommandError, match="plan <console>: `tasks` is required"):
            await client.enqueue_plan("agents: [a]\nbudget: 1m\n")
        assert await client.ping()            # the connection survives refusals
    reader, writer = await asyncio.open_unix_connection(str(home.socket_path))
    writer.write(b"this is not json\n")
    answer = await reader.readline()
    assert b"not a JSON object" in answer
    writer.close()


async def test_events_a_command_causes_arrive_before_its_answer(served):
    home, engine, *_ = served
    async with await EngineClient.connect(home) as client:
        await client.subscribe()
        await client.cancel(RID)
        events = client.drain_events()
        assert [e.type for e in events] == ["RunStateChanged", "RunUpdated"]
        assert events[0].state == "cancelled"
        # the transition is followed by the run's summary fields as they are now (no spec blob)
        assert events[1].fields["state"] == "cancelled" and events[1].fields["end_reason"] == "cancelled by user"
        assert "spec" not in events[1].fields


async def test_history_and_live_events_join_without_gaps_or_duplicates(served):
    home, engine, *_ = served
    async with await EngineClient.connect(home) as client:
        await client.subscribe()
        stop = asyncio.Event()

        async def writer():     # the engine keeps logging while the console loads the history
            i = 0
            while not stop.is_set():
                engine.store.append_event(RID, "stdout", f"live {i}")
                engine.bus.publish(RunEventAppended(RID, kind="stdout", message=f"live {i}"))
                i += 1
                await asyncio.sleep(0)
            return i

        task = asyncio.create_task(writer())
        await asyncio.sleep(0.05)
        hist = await client.run_history(RID, events_limit=100000)
        await asyncio.sleep(0.05)
        stop.set()
        n = await task
        await asyncio.sleep(0.1)
        live = [e for e in client.drain_events() if isinstance(e, RunEventAppended)]
        after = [e.message for e in live if e.recv_seq > hist["as_of_seq"]]
        stored = [e["message"] for e in hist["events"] if e["message"].startswith("live")]
        assert stored + after == [f"live {i}" for i in range(n)]
        assert hist["events_total"] == 61 + len(stored) and 0 < len(stored) < n and len(hist["submissions"]) == 2 and hist["revisions"]


async def test_a_slow_client_is_told_it_lagged(served):
    home, engine, *_ = served
    async with await EngineClient.connect(home) as client:
        await client.subscribe()
        for i in range(500):    # the subscription holds 50: the rest is dropped, never blocking the engine
            engine.bus.publish(RunEventAppended(RID, kind="stdout", message=str(i)))
        await client.ping()
        await asyncio.sleep(0.1)
        events = client.drain_events()
        assert any(isinstance(e, Lagged) for e in events)
        snap = await client.snapshot()
        assert len(snap["runs"]) == 3


async def test_shutdown_is_answered_then_triggered(served):
    home, engine, server, stops = served
    async with await EngineClient.connect(home) as client:
        answer = await client.shutdown(cancel_runs=True)
        await asyncio.sleep(0.05)
    assert answer["stopping"] and stops == [True]


def test_headless_paths_import_no_textual():
    code = ("import sys, importlib, importlib.util\n"
            "mods = ['autorl_tui.cli', 'autorl_tui.engine', 'autorl_tui.daemon.server', 'autorl_tui.daemon.client',\n"
            "        'autorl_tui.daemon.daemon', 'autorl_tui.commands.engine', 'autorl_tui.store.revisions']\n"
            "for extra in ('autorl_tui.commands._batch', 'autorl_tui.engine.engine'):\n"
            "    if importlib.util.find_spec(extra): mods.append(extra)\n"
            "for m in mods: importlib.import_module(m)\n"
            "from autorl_tui.cli import build_parser; build_parser()\n"
            "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
            "print(len(mods), bad)\n"
            "sys.exit(1 if bad else 0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert proc.returncode == 0, proc.stdout + proc.stderr

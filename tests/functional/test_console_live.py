"""The real console driving the real engine: the engine runs as the background daemon
(`autorl-tui engine serve`, started by `start_daemon` exactly as the bare `autorl-tui` does), the
agent is a real subprocess (tests/console/agents/chatty.py), the console is the real app driven
with the keyboard through Textual's pilot."""

import asyncio
import os
import shutil
import signal
import sqlite3
import sys

import psutil
import pytest

from autorl_tui.daemon.client import EngineClient
from autorl_tui.daemon.daemon import EngineOptions, start_daemon, stop_daemon
from autorl_tui.home import Home
from autorl_tui.tui.app import ConsoleApp
from autorl_tui.tui.screens.new_plan import NewPlanScreen
from autorl_tui.tui.screens.prompts import ConfirmScreen
from autorl_tui.tui.screens.run import RunScreen
from autorl_tui.tui.widgets.log_view import LogView
from tests.support.harness import REPO, TASKS, make_reachable_home
from tests.support.waiting import until

pytestmark = pytest.mark.slow
AGENTS = REPO / "tests" / "console" / "agents"


@pytest.fixture
def daemon(tiny_model_dir):
    root = make_reachable_home("autorl-console-")
    root.mkdir(parents=True)
    (root / "models").mkdir()
    shutil.copytree(tiny_model_dir, root / "models" / "tiny")   # built once, cached between sessions
    home = Home.open(str(root))
    env_before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(REPO)     # the daemon imports this checkout
    try:
        info = start_daemon(home, EngineOptions(agents_dirs=[AGENTS], tasks_dirs=[TASKS]))
    finally:
        if env_before is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = env_before
    yield home, info
    try:
        stop_daemon(home, cancel_runs=True, timeout=60)
    finally:
        if psutil.pid_exists(info["pid"]):
            os.kill(info["pid"], signal.SIGKILL)
        shutil.rmtree(root.parent, ignore_errors=True)


def store_row(home: Home, run_id: str) -> dict:
    conn = sqlite3.connect(f"file:{home.store_path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return dict(conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone())
    finally:
        conn.close()


async def test_plan_from_keyboard_live_run_detach_reattach_restart_cancel(daemon):
    home, info = daemon
    app = ConsoleApp(home, notify_events=True)
    async with app.run_test(size=(130, 40)) as pilot:
        await until(pilot, lambda: app.connected, 10, "the console to attach")
        assert app.model.runs == {}
        # --- New plan, keyboard only
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, NewPlanScreen) and app.screen.catalog, 10, "the catalog")
        screen = app.screen
        assert "chatty" in {a["name"] for a in screen.catalog["agents"]}
        await pilot.press("down", "space")               # second task: arith-small (the --tasks-dir comes first, arith-qa before it)
        await pilot.press("tab", "space")                # first agent: chatty
        await pilot.press("tab", "tab", "tab")           # models (tiny preselected) -> seeds -> budget
        await pilot.press(*"150s")                       # focus selects the field's text: typing replaces it
        await until(pilot, lambda: "150s" in screen.query_one("#yaml").text
                    and "✓" in str(screen.query_one("#verdict").render()), 10, "the plan YAML and its check")
        yaml_text = screen.query_one("#yaml").text
        assert "arith-small" in yaml_text and "chatty" in yaml_text and "150s" in yaml_text, yaml_text
        assert "✓ 1 run(s)" in str(screen.query_one("#verdict").render())
        await pilot.press("ctrl+s")
        await until(pilot, lambda: len(app.model.runs) == 1 and not isinstance(app.screen, NewPlanScreen), 20,
                    "the run to be enqueued and shown")
        run_id = next(iter(app.model.runs))
        assert run_id.endswith("-arith-small-chatty-s0")
        table = app.screen.query_one("#runs")
        assert table.row_count == 1
        # --- its state changes, live, in the table
        await until(pilot, lambda: app.model.runs[run_id]["state"] == "running", 180, "the run to start")
        assert "running" in str(table.get_row(run_id)[0])
        # --- open it: log lines and a metric point arrive
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.loaded, 10, "the run screen")
        run_screen = app.screen
        log = run_screen.query_one(LogView)
        await until(pilot, lambda: any(ln.message == "chatty line 19" for ln in log.lines), 60, "the agent's lines")
        await until(pilot, lambda: len(run_screen.series.get("loss", ())) >= 1, 30, "a metric point")
        seen = [ln.message for ln in log.lines if ln.message.startswith("chatty line")]
        assert seen == [f"chatty line {i}" for i in range(20)]
        await pilot.press("q")                           # quit the console; the run goes on

    # --- detached: the engine and the agent go on
    async with await EngineClient.connect(home) as client:
        assert (await client.ping())["pid"] == info["pid"]
    assert store_row(home, run_id)["state"] == "running"

    app2 = ConsoleApp(home, notify_events=False)
    async with app2.run_test(size=(130, 40)) as pilot:
        await until(pilot, lambda: app2.connected and run_id in app2.model.runs, 10, "re-attach")
        assert app2.model.runs[run_id]["state"] == "running"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app2.screen, RunScreen) and app2.screen.loaded, 10, "the run screen")
        log = app2.screen.query_one(LogView)
        history = [ln.message for ln in log.lines if ln.message.startswith("chatty line")]
        assert history == [f"chatty line {i}" for i in range(20)]    # complete, in order, once
        assert len(app2.screen.series.get("loss", ())) == 4          # steps 0, 5, 10, 15
        await pilot.press("escape", "q")

    # --- `engine stop` leaves the agent running; the next engine re-adopts it
    agent = next(p for p in psutil.process_iter(["cmdline"]) if any("chatty.py" in a for a in p.info["cmdline"] or []))
    stop = await cli("engine", "stop", home=home)
    assert "runs keep going" in stop
    assert agent.is_running() and agent.status() != psutil.STATUS_ZOMBIE
    await cli("--agents-dir", str(AGENTS), "--tasks-dir", str(TASKS), "engine", "start", home=home)

    app3 = ConsoleApp(home, notify_events=False)
    async with app3.run_test(size=(130, 40)) as pilot:
        await until(pilot, lambda: app3.connected and run_id in app3.model.runs, 10, "attach to the new engine")
        assert app3.model.engine["pid"] != info["pid"]
        assert app3.model.runs[run_id]["state"] == "running"
        # --- cancel from the Run screen
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app3.screen, RunScreen) and app3.screen.loaded, 10, "the run screen")
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app3.screen, ConfirmScreen), 10, "the confirmation")
        await pilot.press("y")
        await until(pilot, lambda: app3.model.runs[run_id]["state"] == "cancelled", 60, "the cancellation")
        await until(pilot, lambda: "cancelled" in str(app3.screen.query_one("#run-header").render()), 10,
                    "the run header to say cancelled")
    row = store_row(home, run_id)
    assert row["state"] == "cancelled" and row["failure_source"] in (None, "user")
    assert not agent.is_running() or agent.status() == psutil.STATUS_ZOMBIE


async def cli(*args: str, home: Home) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "autorl_tui", "--home", str(home.root), *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(REPO)})
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, out.decode()
    return out.decode()

"""Liveness in the Runs table (issue 38 item 2): an active run's row says the step it is at and how
long ago its last event came; a run silent past the stale limit is marked in its State cell (so
even at 80 columns); the status line says when no engine holds the home. Real engine server on a
real socket (the store-backed engine), the console driven by Textual's pilot."""

import pytest

from autorl_tui.engine.events import MetricPoint, RunEventAppended
from autorl_tui.home import Home
from autorl_tui.tui.app import ConsoleApp
from autorl_tui.tui.formatting import STALE_AFTER_S
from tests.functional.test_console_actions import RID, until
from tests.support.static_engine import T0, ServedEngine

QUEUED = "r0003-arith-scripted-s1"


class ClockConsole(ConsoleApp):
    def __init__(self, home):
        self.now = T0 + 100
        super().__init__(home, clock=lambda: self.now, notify_events=False)


@pytest.fixture
def served(tmp_path):
    home = Home.open(str(tmp_path / "h"))
    with ServedEngine(home) as served:
        yield served


def cell(app, rid, key):
    table = app.screen.query_one("#runs")
    return str(table.get_cell(rid, key))


async def test_active_rows_show_step_and_age_and_a_silent_run_is_marked_stale(served):
    app = ClockConsole(served.home)
    async with app.run_test(size=(200, 40)) as pilot:
        await until(pilot, lambda: len(app.model.runs) == 3, what="the snapshot")
        # from the snapshot: the newest metric step (39) and the newest event (T0+80, clock T0+100)
        assert cell(app, RID, "activity") == "step 39 · 20s ago"
        assert cell(app, QUEUED, "activity") == ""                  # only active runs
        # a live training step moves it on
        served.loop.call_soon_threadsafe(lambda: served.engine.bus.publish(
            MetricPoint(RID, name="loss", value=0.1, step=57, source="metrics_jsonl", ts=T0 + 98)))
        await until(pilot, lambda: cell(app, RID, "activity") == "step 57 · 2s ago", what="the new step")
        # silence: past the stale limit the State cell warns, the liveness cell says how long
        app.now = T0 + 98 + STALE_AFTER_S + 60
        await until(pilot, lambda: cell(app, RID, "state").startswith("⚠"), what="the stale mark")
        assert cell(app, RID, "activity") == "STALE 6m: step 57"
        # a preparing run shows its progress line, not a step
        def prepare():
            served.engine._set_state(QUEUED, "preparing")        # the store and the event, as the engine does
            served.engine.bus.publish(RunEventAppended(QUEUED, kind="harness", ts=app.now - 5,
                                                       message="preparing: materializing split train: 1/3 (33%)"))
        served.loop.call_soon_threadsafe(prepare)
        await until(pilot, lambda: "materializing" in cell(app, QUEUED, "activity"), what="the progress line")
        assert cell(app, QUEUED, "activity") == "materializing split train: 1/3 (33%) · 5s ago"
        assert not cell(app, QUEUED, "state").startswith("⚠")


async def test_the_status_line_says_when_no_engine_holds_the_home(tmp_path):
    home = Home.open(str(tmp_path / "h"))
    app = ClockConsole(home)
    async with app.run_test(size=(200, 40)) as pilot:
        status = app.screen.query_one("#status")
        await until(pilot, lambda: "NO ENGINE holds this home" in str(status.render()), what="the status line")

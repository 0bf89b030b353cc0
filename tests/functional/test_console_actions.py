"""Console actions driven by the keyboard against the store-backed engine (fixed data, real socket,
real server): filter and sort, the command palette, pause, budget extension, cancel with
confirmation, export through the real `autorl-tui export` subprocess, notifications."""

import json

import pytest

from textual.command import CommandList, CommandPalette

from autorl_tui.home import Home
from autorl_tui.tui.screens.new_plan import NewPlanScreen
from autorl_tui.tui.screens.prompts import ConfirmScreen, InputScreen
from autorl_tui.tui.screens.run import RunScreen
from tests.support.frozen_console import FrozenConsole
from tests.support.static_engine import ServedEngine
from tests.support.waiting import until

RID = "r0002-arith-scripted-s0"


@pytest.fixture
def served(tmp_path):
    home = Home.open(str(tmp_path / "h"))
    with ServedEngine(home) as served:
        yield served


def _first_command(app) -> str:
    commands = app.screen.query_one(CommandList)
    if not commands.option_count:
        return ""
    return str(commands.get_option_at_index(commands.highlighted or 0).prompt)


def row_ids(app):
    table = app.screen.query_one("#runs")
    return [table.coordinate_to_cell_key((i, 0)).row_key.value for i in range(table.row_count)]


async def test_runs_filter_sort_palette_and_export(served):
    app = FrozenConsole(served.home)
    app.notify_events = True
    async with app.run_test(size=(130, 36)) as pilot:
        await until(pilot, lambda: len(app.model.runs) == 3, what="the snapshot")
        assert row_ids(app)[0] == RID                         # active first
        await pilot.press("slash", *"state:done")
        await until(pilot, lambda: row_ids(app) == ["r0001-arith-baseline-copy-s0"], what="the filter")
        await pilot.press("escape")
        assert len(row_ids(app)) == 3
        await pilot.press("s")                                # sort by state
        assert row_ids(app)[0] == "r0001-arith-baseline-copy-s0"   # done < queued < running
        await pilot.press("S")
        assert row_ids(app)[0] == RID
        # the command palette offers the registry's actions
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), what="the command palette")
        await pilot.press(*"new plan")
        await until(pilot, lambda: _first_command(app).startswith("New plan"), what="the palette to offer New plan")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, NewPlanScreen), what="the palette to open New plan")
        await pilot.press("escape")
        # export the selected run through `autorl-tui export`
        table = app.screen.query_one("#runs")
        table.move_cursor(row=row_ids(app).index(RID))
        await pilot.press("e")
        out = served.home.reports / f"{RID}.json"
        await until(pilot, lambda: any("written:" in str(n.message) for n in app._notifications), timeout=60,
                    what="the export to finish")
        report = json.loads(out.read_text())           # `autorl-tui report` (or `export`) wrote it
        assert RID in json.dumps(report)


async def test_run_actions_pause_extend_cancel(served):
    app = FrozenConsole(served.home)
    app.notify_events = True
    async with app.run_test(size=(130, 36)) as pilot:
        await until(pilot, lambda: len(app.model.runs) == 3, what="the snapshot")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.loaded, what="the run")
        await pilot.press("p")
        await until(pilot, lambda: app.model.runs[RID]["state"] == "paused", what="pause")
        await pilot.press("p")
        await until(pilot, lambda: app.model.runs[RID]["state"] == "running", what="resume")
        await pilot.press("b")
        await until(pilot, lambda: isinstance(app.screen, InputScreen), what="the budget prompt")
        await pilot.press("ctrl+u", *"5m", "enter")
        await until(pilot, lambda: served.engine.store.get("runs", RID)["budget_s"] == 900.0, what="the extension")
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        await pilot.press("n")                                # the confirmation says no: nothing happens
        await until(pilot, lambda: isinstance(app.screen, RunScreen), what="the dialog to close")
        assert served.engine.store.get("runs", RID)["state"] == "running"   # "no" sent no cancel
        assert app.model.runs[RID]["state"] == "running"
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        await pilot.press("y")
        await until(pilot, lambda: app.model.runs[RID]["state"] == "cancelled", what="the cancellation")
        await until(pilot, lambda: "cancelled" in str(app.screen.query_one("#run-header").render()),
                    what="the run header to say cancelled")
        assert served.engine.store.get("runs", RID)["state"] == "cancelled"
        await pilot.press("c")                                # already finished: refused with a message
        await until(pilot, lambda: any("already cancelled" in str(n.message) for n in app._notifications),
                    what="the refusal")
        assert any("already cancelled" in str(n.message) for n in app._notifications)


async def test_a_console_far_behind_drops_its_backlog_and_resyncs(served):
    from autorl_tui.engine.events import RunEventAppended

    app = FrozenConsole(served.home)
    app.MAX_BACKLOG = 200
    async with app.run_test(size=(130, 36)) as pilot:
        await until(pilot, lambda: len(app.model.runs) == 3, what="the snapshot")

        def flood():
            for i in range(2000):
                served.engine.bus.publish(RunEventAppended(RID, kind="stdout", message=f"flood {i}"))
        served.loop.call_soon_threadsafe(flood)
        await until(pilot, lambda: app.dropped_events > 0, what="the backlog to be dropped")
        # every event reached the client and none waits (backlog 0 alone can be a pause mid-flood)
        await until(pilot, lambda: app.client.received == 2000 and app.client.backlog == 0,
                    what="the console to catch up")
        assert app.connected and len(app.model.runs) == 3      # state re-read, nothing lost from the table


async def test_loading_a_plan_fills_the_form_and_editing_the_form_keeps_it(served, tmp_path):
    import yaml
    from textual.widgets import Input, SelectionList, TextArea

    plan = tmp_path / "ctrlc.yaml"
    plan.write_text("name: ctrlc\ntasks: [arith]\nagents: [reference]\nmodels: [tiny]\nseeds: [0, 1]\n"
                    "budget: 2m\nexecutor: local\npriority: 3\n")
    app = FrozenConsole(served.home)
    async with app.run_test(size=(130, 36)) as pilot:
        await until(pilot, lambda: len(app.model.runs) == 3, what="the snapshot")
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, NewPlanScreen) and app.screen.catalog, what="the catalog")
        screen = app.screen
        screen.query_one("#path", Input).value = str(plan)
        await pilot.press("ctrl+o")
        q = screen.query_one
        await until(pilot, lambda: q("#name", Input).value == "ctrlc" and q("#agents", SelectionList).selected,
                    what="the form to be filled")
        assert q("#agents", SelectionList).selected == ["reference"]
        assert q("#tasks", SelectionList).selected == ["arith"]
        assert (q("#seeds", Input).value, q("#budget", Input).value, q("#priority", Input).value) == ("0,1", "2m", "3")
        assert yaml.safe_load(q("#yaml", TextArea).text)["name"] == "ctrlc"
        # touching a field rewrites the YAML from the form, which now holds the loaded plan
        q("#budget", Input).focus()
        await pilot.press("end", "backspace", "backspace", *"3m")
        await until(pilot, lambda: "3m" in q("#yaml", TextArea).text, what="the YAML to follow the form")
        shown = yaml.safe_load(q("#yaml", TextArea).text)
        assert shown["name"] == "ctrlc" and shown["agents"] == ["reference"] and shown["tasks"] == ["arith"]
        assert shown["seeds"] == [0, 1] and shown["priority"] == 3 and shown["budget"] == "3m"


async def test_retry_and_pausing_the_queue_ask_first(served):
    app = FrozenConsole(served.home)
    app.notify_events = True
    async with app.run_test(size=(130, 36)) as pilot:
        await until(pilot, lambda: len(app.model.runs) == 3, what="the snapshot")
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the pause confirmation")
        await pilot.press("n")
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), what="the dialog to close")
        assert not served.engine.queue_paused                 # "no" paused nothing
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the pause confirmation")
        await pilot.press("y")
        await until(pilot, lambda: served.engine.queue_paused, what="the queue to pause")
        # the console knows once the engine's event arrives (before, P would ask to pause again)
        await until(pilot, lambda: app.model.queue_paused, what="the console to see the pause")
        await pilot.press("P")                                # resuming needs no confirmation
        await until(pilot, lambda: not served.engine.queue_paused, what="the queue to resume")
        table = app.screen.query_one("#runs")
        table.move_cursor(row=row_ids(app).index("r0001-arith-baseline-copy-s0"))
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the retry confirmation")
        await pilot.press("n")
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), what="the dialog to close")
        assert not any("static engine runs nothing" in str(n.message) for n in app._notifications)
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the retry confirmation")
        await pilot.press("y")                                # the static engine refuses every retry: the
        await until(pilot, lambda: any("static engine runs nothing" in str(n.message)   # refusal shows it was sent
                                       for n in app._notifications), what="the retry to reach the engine")


def burst(app, *keys):
    """Keys as a terminal delivers a fast typist's burst: all queued at once, none waiting for the
    screen to settle (so the filter's deferred focus has not happened yet)."""
    from textual import events
    for key in keys:
        event = events.Key(key, key if len(key) == 1 else None)
        event.set_sender(app)
        app._driver.send_message(event)


async def test_the_filter_bar_never_leaks_keys(served):
    """Typing "humaneval" right after `/` opened New plan (the `n`): keys reached the table's
    bindings before the deferred focus moved to the filter bar, and again once it lost focus."""
    app = FrozenConsole(served.home)
    async with app.run_test(size=(130, 36)) as pilot:
        await until(pilot, lambda: len(app.model.runs) == 3, what="the snapshot")
        runs_screen = app.screen
        burst(app, "slash", *"scripted")
        box = runs_screen.query_one("#filter")
        await until(pilot, lambda: runs_screen.filter_text == "scripted", what="every key to land in the filter")
        assert app.screen is runs_screen and runs_screen.filter_text == "scripted"
        assert all("scripted" in rid for rid in row_ids(app)) and len(row_ids(app)) < 3
        # the bar loses focus (a click on the table) while still open: letters still go to it
        runs_screen.query_one("#runs").focus()
        await pilot.pause()
        burst(app, *" gen")                                   # n = New plan, g = GPUs, e = export
        await until(pilot, lambda: box.value == "scripted gen", what="the letters to reach the filter")
        assert app.screen is runs_screen and box.has_focus
        assert not any("export" in str(n.message) for n in app._notifications)
        # enter closes the bar, keeping the filter (shown in the hint); keys are commands again
        await pilot.press("backspace", "backspace", "backspace", "backspace", "enter")
        await until(pilot, lambda: not box.display and runs_screen.filter_text == "scripted", what="the bar to close")
        assert runs_screen.filter_text == "scripted" and len(row_ids(app)) < 3
        assert "filter: scripted" in str(runs_screen.query_one("#runs-hint").render())
        await pilot.press("slash")                             # reopens with the filter to edit
        await until(pilot, lambda: box.display and box.has_focus, what="the bar to reopen")
        assert box.value == "scripted"
        await pilot.press("escape")
        await until(pilot, lambda: len(row_ids(app)) == 3, what="escape to clear the filter")
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, NewPlanScreen), what="n to be a command again")


async def test_the_log_search_bar_never_leaks_keys(served):
    """The Run screen's search had the same leak: "/step" typed at once paused the agent (p) and
    exported a report (e). Enter closes the bar so that n/N are commands again."""
    app = FrozenConsole(served.home)
    app.notify_events = True
    async with app.run_test(size=(130, 36)) as pilot:
        await until(pilot, lambda: len(app.model.runs) == 3, what="the snapshot")
        app.open_run(RID)
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.loaded, what="the run")
        burst(app, "slash", *"step 05")
        box = app.screen.query_one("#search")
        await until(pilot, lambda: box.value == "step 05", what="every key to land in the search bar")
        await pilot.press("enter")
        log = app.screen.query_one("#log-view")
        await until(pilot, lambda: not box.display and log.match_index is not None, what="the search")
        assert log.lines[log.match_index].message.startswith("step 05")
        first = log.match_index
        await pilot.press("n")                                 # a command again: the next match
        await until(pilot, lambda: log.match_index != first, what="the next match")
        assert served.engine.store.get("runs", RID)["state"] == "running"    # never paused
        assert not any("export" in str(n.title) for n in app._notifications)

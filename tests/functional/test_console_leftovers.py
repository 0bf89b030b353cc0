"""Issue 38 item 14, the console's leftovers, each asserting what was wrong: the palette said "app
action" under every entry and offered two quits; Help left out `end` and `o`; a failed run's State
cell was cut (`✗ failed:age`); the plan form said `✗ plan the plan:`. Real engine server on a real
socket (the store-backed engine), console driven by Textual's pilot."""

from textual.command import CommandList, CommandPalette
from textual.widgets import Static

from autorl_tui.tui.screens.help import help_table
from autorl_tui.tui.screens.new_plan import NewPlanScreen
from tests.functional.test_console_actions import served, until  # noqa: F401 - the fixture
from tests.support.frozen_console import FrozenConsole


def palette_entries(app) -> list[str]:
    commands = app.screen.query_one(CommandList)
    return [str(commands.get_option_at_index(i).prompt) for i in range(commands.option_count)]


async def test_palette_help_failed_runs_and_plan_errors_read_right(served):  # noqa: F811
    served.engine._set_state("r0003-arith-scripted-s1", "failed", reason="grader exited 1", source="grading")
    app = FrozenConsole(served.home)
    async with app.run_test(size=(200, 40)) as pilot:
        await until(pilot, lambda: len(app.model.runs) == 3, what="the snapshot")
        table = app.screen.query_one("#runs")
        assert str(table.get_cell("r0003-arith-scripted-s1", "state")) == "✗ failed"      # not cut
        assert str(table.get_cell("r0003-arith-scripted-s1", "activity")) == "grading: grader exited 1"
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), what="the palette")
        await pilot.press(*"quit")
        await until(pilot, lambda: palette_entries(app), what="quit entries")
        entries = palette_entries(app)
        assert len([e for e in entries if "quit" in e.lower()]) == 1, entries
        assert not any("app action" in e for e in entries) and "Everywhere" in entries[0], entries
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, CommandPalette), what="the palette to close")
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, NewPlanScreen), what="the plan form")
        from textual.widgets import TextArea
        app.screen.query_one("#yaml", TextArea).text = "tasks: [arith]\nfrobs: 1\n"
        verdict = app.screen.query_one("#verdict", Static)
        await until(pilot, lambda: "unknown key" in str(verdict.render()), what="the verdict")
        assert "plan the plan" not in str(verdict.render())


def test_help_lists_every_key():
    rows = list(zip(*(c.cells for c in help_table().columns)))
    keys = {(where, keys) for where, keys, _ in rows}
    assert ("Run screen", "end") in keys and ("Runs screen", "⏎/o") in keys
    assert len([r for r in rows if r[1] == "ctrl+p"]) == 1              # listed once


async def test_the_footer_fits_at_80_and_120_columns(served):  # noqa: F811
    """Every key the footer shows is whole on screen (at 80 and 120 the last ones were cut)."""
    from textual.widgets._footer import FooterKey

    from autorl_tui.tui.screens.run import RunScreen

    for width in (80, 120):
        app = FrozenConsole(served.home)
        async with app.run_test(size=(width, 24)) as pilot:
            await until(pilot, lambda: len(app.model.runs) == 3, what="the snapshot")
            for screen in ("runs", "run"):
                if screen == "run":
                    app.open_run("r0002-arith-scripted-s0")
                    await until(pilot, lambda: isinstance(app.screen, RunScreen), what="the run screen")
                await pilot.pause()
                keys = list(app.screen.query(FooterKey))
                assert keys
                cut = [(k.key_display, k.description) for k in keys if k.region.right > width or not k.region.width]
                assert not cut, f"{screen} screen at {width} columns cuts {cut}"


async def test_a_long_log_line_can_be_read_in_full(served):  # noqa: F811
    """A line longer than the screen was cut at the edge: `v` shows the current match in full."""
    from autorl_tui.engine.events import RunEventAppended
    from autorl_tui.tui.screens.prompts import LineScreen
    from autorl_tui.tui.screens.run import RunScreen

    long = "Traceback: " + " ".join(f"frame{i}" for i in range(120)) + " [END]"
    app = FrozenConsole(served.home)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: len(app.model.runs) == 3, what="the snapshot")
        app.open_run("r0002-arith-scripted-s0")
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.loaded, what="the run")
        served.loop.call_soon_threadsafe(lambda: served.engine.bus.publish(
            RunEventAppended("r0002-arith-scripted-s0", kind="stderr", message=long)))
        await until(pilot, lambda: "[END]" in app.screen.query_one("#log-view").lines[-1].message, what="the line")
        await pilot.press("slash", *"frame7", "enter")
        await pilot.press("v")
        await until(pilot, lambda: isinstance(app.screen, LineScreen), what="the line view")
        text = app.screen.query_one("#line-text")
        await pilot.pause()
        assert str(text.render()).replace("\n", " ").split() == long.split()   # all of it, wrapped
        assert text.size.height > 3                                                # over several rows
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, RunScreen), what="back to the run")

"""Snapshots of every console screen over fixed data: a store filled through the real Store API
(tests/support/static_engine.py), served by the real EngineServer over a real Unix socket, read
by the real console through EngineClient. Times are pinned (clock, machine size, pid, home)."""

import time

import pytest

from autorl_tui.home import Home
from tests.support.frozen_console import FrozenConsole
from tests.support.static_engine import ServedEngine, demo_cluster

SIZE = (130, 36)


@pytest.fixture
def served(tmp_path):
    home = Home.open(str(tmp_path / "h"))
    with ServedEngine(home) as served:
        yield served


async def _until(pilot, condition, what: str, timeout: float = 120.0) -> None:
    """Wait for the console to reach a state, however loaded the machine; fail saying which state
    it never reached (a snapshot of a half-loaded screen would fail as an unexplained mismatch)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"the console did not reach this state within {timeout:.0f} s: {what}")
        await pilot.pause(0.05)


async def _settled(pilot) -> None:
    """The current screen's background loads (history, catalog, revisions) have all finished."""
    screen = pilot.app.screen
    await _until(pilot, lambda: not any(w.node is screen and not w.is_finished for w in pilot.app.workers),
                 f"{type(screen).__name__}'s background work finished")
    await pilot.pause()


async def _loaded(pilot):
    app = pilot.app
    await _until(pilot, lambda: app.connected and app.model.runs, "connected to the engine, runs listed")
    await _settled(pilot)


async def _run_loaded(pilot):
    await _loaded(pilot)
    await pilot.press("enter")
    await _until(pilot, lambda: getattr(pilot.app.screen, "loaded", False), "the run screen loaded its history")
    await _settled(pilot)


async def _on_screen(pilot, name: str) -> None:
    await _until(pilot, lambda: type(pilot.app.screen).__name__ == name, f"{name} shown")
    await _settled(pilot)


def test_runs_screen(served, snap_compare):
    assert snap_compare(FrozenConsole(served.home), terminal_size=SIZE, run_before=_loaded)


def test_run_screen_log(served, snap_compare):
    assert snap_compare(FrozenConsole(served.home), terminal_size=SIZE, run_before=_run_loaded)


def test_run_screen_metrics(served, snap_compare):
    assert snap_compare(FrozenConsole(served.home), terminal_size=SIZE, run_before=_run_loaded, press=["2"])


def test_run_screen_submissions(served, snap_compare):
    assert snap_compare(FrozenConsole(served.home), terminal_size=SIZE, run_before=_run_loaded, press=["3"])


def test_run_screen_revision_diff(served, snap_compare):
    async def before(pilot):
        await _run_loaded(pilot)
        await pilot.press("4", "down")
        await _until(pilot, lambda: "select a revision" not in str(pilot.app.screen.query_one("#diff").render()),
                     "a revision's diff shown")
        await _settled(pilot)
    assert snap_compare(FrozenConsole(served.home), terminal_size=SIZE, run_before=before)


def test_new_plan_screen(served, snap_compare):
    async def before(pilot):
        await _loaded(pilot)
        await pilot.press("n")
        await _on_screen(pilot, "NewPlanScreen")
    assert snap_compare(FrozenConsole(served.home), terminal_size=SIZE, run_before=before)


def test_gpus_screen(served, snap_compare):
    async def before(pilot):
        await _loaded(pilot)
        await pilot.press("g")
        await _on_screen(pilot, "GpusScreen")
    assert snap_compare(FrozenConsole(served.home), terminal_size=SIZE, run_before=before)


def test_gpus_screen_with_a_ray_cluster(tmp_path, snap_compare):
    """The cluster beside the local slots; a worker that dies while the screen is shown turns DEAD
    and the run's next attempt appears on the other worker (ClusterChanged, live)."""
    with ServedEngine(Home.open(str(tmp_path / "h")), cluster=demo_cluster()) as served:
        async def before(pilot):
            await _loaded(pilot)
            await pilot.press("g")
            await _on_screen(pilot, "GpusScreen")
            table = pilot.app.screen.query_one("#cluster-table")
            await _until(pilot, lambda: table.row_count == 5, "the cluster's rows shown")
            served.loop.call_soon_threadsafe(served.engine.set_cluster, demo_cluster(worker_b_alive=False))
            await _until(pilot, lambda: "DEAD" in [str(c) for c in table.get_column("state")],
                         "worker b shown dead")
            await _settled(pilot)
        assert snap_compare(FrozenConsole(served.home), terminal_size=SIZE, run_before=before)


def test_help_screen(served, snap_compare):
    async def before(pilot):
        await _loaded(pilot)
        await pilot.press("question_mark")
        await _on_screen(pilot, "HelpScreen")
    assert snap_compare(FrozenConsole(served.home), terminal_size=SIZE, run_before=before)


# Narrow and wide terminals (issue 25, items 4-5): at 80x24 the runs table keeps state, id and the
# scores and drops the other columns; the run header wraps rather than losing the scores; log
# categories are whole words; checkboxes show ✓ (not only a colour).
@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_runs_screen_at_size(served, snap_compare, size):
    assert snap_compare(FrozenConsole(served.home), terminal_size=size, run_before=_loaded)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_run_screen_log_at_size(served, snap_compare, size):
    assert snap_compare(FrozenConsole(served.home), terminal_size=size, run_before=_run_loaded)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_new_plan_screen_at_size(served, snap_compare, size):
    async def before(pilot):
        await _loaded(pilot)
        await pilot.press("n")
        await _on_screen(pilot, "NewPlanScreen")
        await pilot.press("down", "space")      # a second task ticked: ✓ next to it, blank next to the others
        await _settled(pilot)
    assert snap_compare(FrozenConsole(served.home), terminal_size=size, run_before=before)

"""The console application: attaches to the engine through an EngineClient, applies its events in
batches (a few times a second, so a flood of log lines never starves input), and hosts the screens."""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Awaitable, Callable

from textual.app import App
from textual.css.query import NoMatches
from textual.command import DiscoveryHit, Hit, Hits, Provider

from autorl_tui.daemon.client import EngineClient, EngineNotRunning, Lagged
from autorl_tui.exitcodes import InfraError, UsageError
from autorl_tui.home import EngineLock, Home
from autorl_tui.run_states import ACTIVE_STATES
from autorl_tui.tui.actions import SCOPE_TITLES, actions_for, bindings
from autorl_tui.tui.formatting import fmt_delta, fmt_score, short_id
from autorl_tui.tui.model import Changes, ConsoleModel


class ActionsProvider(Provider):
    """Every registry action of the current screen (and the global ones) in the command palette."""

    def _actions(self):
        screen = self.screen
        scope = getattr(screen, "SCOPE", None)
        target_screen = screen
        if scope is None:   # the palette opened over a modal: use the screen below
            for s in reversed(self.app.screen_stack):
                if getattr(s, "SCOPE", None):
                    scope, target_screen = s.SCOPE, s
                    break
        for action in actions_for("app", scope or "runs"):
            if not action.palette:
                continue
            namespace = self.app if action.scope == "app" else target_screen
            yield action, namespace

    def _runner(self, name, namespace):
        async def run():
            await self.app.run_action(name, namespace)
        return run

    async def discover(self) -> Hits:
        for action, ns in self._actions():
            yield DiscoveryHit(f"{action.description}  ({action.keys_label})", self._runner(action.name, ns),
                               help=SCOPE_TITLES.get(action.scope, action.scope))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for action, ns in self._actions():
            text = f"{action.description}  ({action.keys_label})"
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), self._runner(action.name, ns), help=SCOPE_TITLES.get(action.scope, action.scope))


class ConsoleApp(App):
    CSS_PATH = str(Path(__file__).with_name("app.tcss"))
    TITLE = "autorl-tui"
    BINDINGS = bindings("app")
    COMMANDS = App.COMMANDS | {ActionsProvider}
    MAX_BATCH = 5000        # events applied per refresh tick
    SLICE = 250             # events applied between two chances for input to run (a few ms)
    MAX_BACKLOG = 25_000    # beyond this (seconds behind a flood), re-read the state instead of catching up
    SNAPSHOT_PAGE = 500     # runs per snapshot answer

    def __init__(self, home: Home, client: EngineClient | None = None, *, refresh_hz: float = 4.0,
                 clock: Callable[[], float] = time.time, notify_events: bool = True):
        super().__init__()
        self.home = home
        self.client = client
        self.model = ConsoleModel()
        self.refresh_hz = refresh_hz
        self.clock = clock
        self.notify_events = notify_events
        self.connected = False
        self.applied_batches = 0
        self.dropped_events = 0
        self.snapshot_runs_received = 0     # run rows the snapshots sent (a resync sends only changed ones)
        self._resync_pending = False
        self._applying = False
        self._reconnect_task: asyncio.Task | None = None
        import psutil

        # Scales of the resource gauges (tests pin them for deterministic snapshots).
        self.machine = {"cpus": os.cpu_count() or 1, "mem": psutil.virtual_memory().total}

    def get_system_commands(self, screen):
        """Textual's own palette entries, less its Quit: the registry's `q` quit (which leaves
        runs going) is the one way out, so the palette offers one quit, not two."""
        for command in super().get_system_commands(screen):
            if command.title != "Quit":
                yield command

    # ------------------------------------------------------------------ attach
    async def on_mount(self) -> None:
        from autorl_tui.tui.screens.runs import RunsScreen

        self.push_screen(RunsScreen())
        await self.attach()
        # Everything built so far (Textual, the widgets, the imported modules: most of the heap)
        # lives as long as the console: out of the collector's reach, a full collection under a
        # flood walks only what the flood allocates (measured: 164 ms pauses before, see docs/console.md).
        gc.collect()
        gc.freeze()
        self.set_interval(1 / self.refresh_hz, self.apply_pending)
        self.set_interval(1.0, self.tick)

    async def attach(self) -> None:
        try:
            if self.client is None or self.client.closed:
                self.client = await EngineClient.connect(self.home)
            await self.client.subscribe()
            await self.resync()
            self.connected = True
        except (EngineNotRunning, InfraError) as exc:
            self.connected = False
            self.notify(str(exc), title="engine unreachable", severity="error", timeout=10)
        self.refresh_status()

    async def resync(self) -> None:
        """Read the runs again, a page at a time, sending the digests of the rows we hold: the
        engine sends back only the runs that changed (a re-attach after a short absence moves a
        few rows, not every run). A count that does not add up reloads everything."""
        known = self.model.known_digests()
        page: dict = {}
        async for page in self.client.snapshot_pages(self.SNAPSHOT_PAGE, known=known):
            self.model.merge_snapshot(page)
            self.snapshot_runs_received += len(page.get("runs", ()))
        if known and page.get("total") != len(self.model.runs):
            self.model.load_snapshot({})
            async for page in self.client.snapshot_pages(self.SNAPSHOT_PAGE):
                self.model.merge_snapshot(page)
                self.snapshot_runs_received += len(page.get("runs", ()))
        for screen in self.screen_stack:
            if hasattr(screen, "reload"):
                screen.reload()
        self.refresh_status()

    async def on_unmount(self) -> None:
        gc.unfreeze()       # a process that runs several consoles (the tests) collects them again
        if self.client is not None:
            await self.client.close()

    # ------------------------------------------------------------------ batching
    async def apply_pending(self) -> None:
        """Apply what arrived since the last tick. The events go through the model SLICE at a time,
        yielding to the event loop between slices, and reach the screens once at the end: a key
        pressed during a flood waits for one slice of log work at most, and its frame draws only
        what the key changed (the log's new lines come with the next frame) (docs/console.md,
        "Floods")."""
        if self.client is None or self._applying:
            return
        self._applying = True
        try:
            changes: Changes | None = None
            left = self.MAX_BATCH
            while left > 0:
                events = self._take(min(self.SLICE, left))
                if not events:
                    break
                left -= len(events)
                step = self.model.apply(events)
                changes = step if changes is None else changes.merge(step)
                if changes.disconnected:
                    break
                await asyncio.sleep(0)
            if changes is not None:
                self._apply_changes(changes)
        finally:
            self._applying = False

    def _take(self, limit: int) -> list:
        if self.client is None:
            return []
        if self.client.backlog > self.MAX_BACKLOG:
            # Far behind (a flood on a starved CPU): drop what is queued and re-read the state, as
            # when the engine drops events for us. Memory and stalls stay bounded.
            return [Lagged(self.client.discard_backlog())]
        return self.client.drain_events(limit=limit)

    def _apply_changes(self, changes: Changes) -> None:
        self.applied_batches += 1
        self.dropped_events += changes.dropped
        self._each_screen("apply_changes", changes)
        self._notify(changes)
        if changes.disconnected:
            self.connected = False
            self.notify(f"{changes.disconnected}; reconnecting…", title="engine", severity="warning")
            if self._reconnect_task is None or self._reconnect_task.done():
                self._reconnect_task = asyncio.create_task(self._reconnect())
        elif (changes.resync or changes.unknown_runs) and not self._resync_pending:
            self._resync_pending = True
            self.run_worker(self._resync_soon(), exclusive=True, group="resync")
        self.refresh_status()

    async def _resync_soon(self) -> None:
        try:
            await self.resync()
        except (EngineNotRunning, InfraError):
            pass
        finally:
            self._resync_pending = False

    async def _reconnect(self) -> None:
        while not self.connected:
            await asyncio.sleep(2.0)
            try:
                self.client = await EngineClient.connect(self.home)
            except EngineNotRunning:
                continue
            await self.attach()
            if self.connected:
                self.notify("re-attached to the engine", title="engine")

    def tick(self) -> None:
        self._each_screen("tick")

    def _each_screen(self, method: str, *args) -> None:
        for screen in list(self.screen_stack):
            if hasattr(screen, method):
                try:
                    getattr(screen, method)(*args)
                except NoMatches:   # the screen is being torn down (quitting)
                    pass

    def _notify(self, changes: Changes) -> None:
        if not self.notify_events:
            return
        for ev in changes.states:
            run = self.model.runs.get(ev.run_id) or {}
            sid = short_id(ev.run_id or "?")
            what = f"{sid} {run.get('task', '')}/{run.get('agent', '')}"
            if ev.state == "done":
                self.notify(f"{what} done: best dev {fmt_score(run.get('best_dev_score'))} "
                            f"({fmt_delta(run.get('dev_improvement'))} vs baseline), test "
                            f"{fmt_score(run.get('test_score'))} ({fmt_delta(run.get('improvement'))})",
                            title="run finished")
            elif ev.state in ("failed", "lost"):
                source = f" [{ev.failure_source}]" if ev.failure_source else ""
                self.notify(f"{what} {ev.state}{source}: {ev.reason or ''}", title=f"run {ev.state}",
                            severity="error", timeout=10)
        for flag in changes.trust_flags:
            run = self.model.runs.get(flag.run_id or "") or {}
            self.notify(f"{short_id(flag.run_id or '?')} {run.get('task', '')}/{run.get('agent', '')}: {flag.message}",
                        title="trust finding", severity="error" if flag.level == "error" else "warning", timeout=15)
        for rid in changes.beat_baseline:
            run = self.model.runs[rid]
            self.notify(f"{short_id(rid)} {run.get('task')}/{run.get('agent')}: best dev "
                        f"{fmt_score(run.get('best_dev_score'))} beats its dev baseline "
                        f"{fmt_score(run.get('baseline_dev_score'))}",
                        title="beats baseline")

    def refresh_status(self) -> None:
        self._each_screen("refresh_status")

    def status_line(self) -> str:
        runs = self.model.runs.values()
        active = sum(1 for r in runs if r["state"] in ACTIVE_STATES)
        queued = sum(1 for r in runs if r["state"] == "queued")
        if self.connected:
            conn = f"engine pid {self.model.engine.get('pid', '?')}"
        elif EngineLock(self.home).held():
            conn = "DISCONNECTED (an engine holds this home)"
        else:
            conn = "NO ENGINE holds this home: active runs are not being watched (autorl-tui resume)"
        queue = "  queue PAUSED" if self.model.queue_paused else ""
        return f"{conn}  home {self.home.root}  runs: {active} active, {queued} queued, {len(self.model.runs)} total{queue}"

    # ------------------------------------------------------------------ engine commands
    def engine_command(self, make: Callable[[EngineClient], Awaitable], done: str | None = None) -> None:
        """Run an engine command in the background; report success or the engine's error."""
        async def go():
            try:
                result = await make(self.client)
            except (UsageError, InfraError) as exc:
                self.notify(str(exc), title="engine refused", severity="error", timeout=8)
                return
            if done:
                self.notify(done.format(result=result))
        self.run_worker(go(), group="engine-command")

    # ------------------------------------------------------------------ app-wide actions
    async def action_quit_console(self) -> None:
        if getattr(self.screen, "SCOPE", None) == "new_plan":
            self.notify("esc leaves the form; ctrl+q quits from here", severity="warning")
            return
        self.exit()

    def action_help(self) -> None:
        from autorl_tui.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_new_plan(self) -> None:
        from autorl_tui.tui.screens.new_plan import NewPlanScreen

        if not isinstance(self.screen, NewPlanScreen):
            self.push_screen(NewPlanScreen())

    def action_gpus(self) -> None:
        from autorl_tui.tui.screens.gpus import GpusScreen

        if not isinstance(self.screen, GpusScreen):
            self.push_screen(GpusScreen())

    def action_show_runs(self) -> None:
        while len(self.screen_stack) > 2:
            self.pop_screen()

    def action_toggle_queue(self) -> None:
        if self.model.queue_paused:
            self.engine_command(lambda c: c.resume_queue(), "queue resumed")
            return
        from autorl_tui.tui.screens.prompts import ConfirmScreen

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.engine_command(lambda c: c.pause_queue(), "queue paused: running runs go on, nothing new starts")
        self.push_screen(ConfirmScreen("Pause the queue? Running runs go on; nothing new starts until P again."),
                         confirmed)

    def open_run(self, run_id: str) -> None:
        from autorl_tui.tui.screens.run import RunScreen

        self.push_screen(RunScreen(run_id))

    def export_report(self, run_id: str) -> None:
        """`autorl-tui report RUN --html --json` when reports are installed, else `export --json`;
        runs in a subprocess so the console stays responsive."""
        out_dir = self.home.reports
        have = lambda mod: importlib.util.find_spec(f"autorl_tui.commands.{mod}") is not None  # noqa: E731
        base = [sys.executable, "-m", "autorl_tui", "--home", str(self.home.root)]
        if have("report"):
            html, js = out_dir / f"{run_id}.html", out_dir / f"{run_id}.json"
            cmd, outputs = base + ["report", run_id, "--html", str(html), "--json", str(js)], [html, js]
        elif have("export"):
            js = out_dir / f"{run_id}.json"
            cmd, outputs = base + ["export", run_id, "--json", str(js)], [js]
        else:
            self.notify("no report or export command is installed", title="export", severity="error")
            return

        async def go():
            self.notify(f"exporting {short_id(run_id)}…", title="export")
            proc = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE,
                                                        stderr=asyncio.subprocess.STDOUT)
            out, _ = await proc.communicate()
            if proc.returncode == 0:
                self.notify("written: " + ", ".join(str(p) for p in outputs), title="export", timeout=10)
            else:
                tail = out.decode(errors="replace").strip().splitlines()[-3:]
                self.notify(f"export failed (exit {proc.returncode}): {' '.join(tail)}", title="export",
                            severity="error", timeout=10)
        self.run_worker(go(), group="export")


def css_path() -> Path:
    return Path(__file__).with_name("app.tcss")

"""`autorl-tui --batch PLAN`: run a plan headless with an in-process engine and exit with a typed
code (0 all done, 1 a run failed/cancelled/lost, 2 usage, 3 infrastructure, 130 interrupted).
Imports no Textual."""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import signal
import sys
from pathlib import Path

from autorl_tui.exitcodes import ExitCode, InfraError, UsageError


def engine_from_args(args, role: str = "batch"):
    from autorl_tui.engine.engine import Engine
    from autorl_tui.home import Home

    from autorl_tui.executors.gpus import inventory

    gpus = inventory(getattr(args, "gpus", None)).ids or None
    return Engine(Home.open(args.home), concurrency=getattr(args, "concurrency", None), gpus=gpus,
                  agents_dirs=[Path(p) for p in getattr(args, "agents_dir", [])],
                  tasks_dirs=[Path(p) for p in getattr(args, "tasks_dir", [])], role=role)


def run_batch(args) -> int:
    from autorl_tui.catalog.plans import load_plan
    from autorl_tui.daemon.client import engine_is_running
    from autorl_tui.home import Home

    plan = load_plan(args.batch)
    if engine_is_running(Home.open(args.home).root):
        return asyncio.run(_hand_over(args, plan))
    return asyncio.run(_run(args, plan))


class Interrupt:
    """SIGINT and SIGTERM while a plan is followed, through the event loop's own handlers: `event`
    is set and `name` says which signal came last. They work whatever disposition the process
    inherited: a background job of a non-interactive shell starts with SIGINT ignored, and then
    asyncio.run installs no Ctrl-C handler of its own (a handed-over plan was followed to its end
    and exited 0 under such a parent)."""
    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.name: str | None = None

    def _caught(self, name: str) -> None:
        self.name = name
        self.event.set()

    def __enter__(self) -> "Interrupt":
        loop = asyncio.get_running_loop()
        for sig in self.SIGNALS:
            loop.add_signal_handler(sig, self._caught, sig.name)
        return self

    def __exit__(self, *exc) -> None:
        loop = asyncio.get_running_loop()
        for sig in self.SIGNALS:
            loop.remove_signal_handler(sig)

    async def came_first(self, task: asyncio.Task) -> bool:
        """Wait for `task` or a signal: True when a signal came first (`task` is then cancelled)."""
        stopper = asyncio.create_task(self.event.wait())
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if not self.event.is_set():
            return False
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return True


async def _hand_over(args, plan) -> int:
    """An engine already owns the home (the console's background engine): give it the plan and
    follow the plan's runs over the socket until they end. Ctrl-C (or SIGTERM) stops following,
    not the runs: exit 130, naming the runs that go on."""
    from autorl_tui.commands._display import PlainDisplay, print_outcome
    from autorl_tui.daemon.client import EngineClient
    from autorl_tui.home import Home
    from autorl_tui.run_states import FINAL_STATES
    from autorl_tui.store.queries import StoreReader

    home = Home.open(args.home)
    with Interrupt() as interrupt:
        client = await EngineClient.connect(home.root)
        display = PlainDisplay(None)
        try:
            await client.subscribe()
            handing = asyncio.create_task(client.enqueue_plan(plan.source, str(args.batch)))
            if await interrupt.came_first(handing):
                print(f"interrupted ({interrupt.name}) while plan {plan.name} was being handed to the engine: "
                      f"see whether it was queued with `autorl-tui runs list --home {shlex.quote(str(home.root))}`",
                      file=sys.stderr, flush=True)
                return int(ExitCode.INTERRUPTED)
            run_ids = handing.result()
            display.note(f"plan {plan.name} handed to the running engine: {', '.join(run_ids)}")
            states = {r: "queued" for r in run_ids}
            follower = asyncio.create_task(_follow(client, run_ids, states, display))
            if await interrupt.came_first(follower):
                going = [r for r in run_ids if states.get(r) not in FINAL_STATES]
                if going:
                    h = shlex.quote(str(home.root))
                    listed = ", ".join(f"{r} ({states[r]})" for r in going)
                    print(f"stopped following plan {plan.name} ({interrupt.name}); its runs go on in the engine: "
                          f"{listed}\n"
                          f"  follow them: autorl-tui --home {h}\n"
                          f"  cancel them: autorl-tui cancel {' '.join(going)} --home {h}", file=sys.stderr, flush=True)
                return int(ExitCode.INTERRUPTED)
            follower.result()            # the engine went away: InfraError
            rows = [r for r in (await client.snapshot())["runs"] if r["id"] in run_ids]
        finally:
            await client.close()
    with StoreReader.open(home.store_path) as reader:     # the engine is another process's: read-only
        return int(print_outcome(reader, home.root, rows, plan.name))


async def _follow(client, run_ids: list[str], states: dict[str, str], display) -> None:
    """Render the runs' events and keep `states` current until every run has ended."""
    from autorl_tui.daemon.client import Disconnected, Lagged
    from autorl_tui.engine.events import RunStateChanged
    from autorl_tui.run_states import FINAL_STATES

    async def reread() -> None:
        states.update({r["id"]: r["state"] for r in (await client.snapshot())["runs"] if r["id"] in run_ids})

    await reread()
    async for event in client.events():
        if isinstance(event, Disconnected):
            raise InfraError("the engine went away while following the plan; its runs go on "
                             "(re-attach with `autorl-tui`)")
        if isinstance(event, Lagged):
            await reread()
        elif event.run_id in run_ids:
            display.render(event)
            if isinstance(event, RunStateChanged):
                states[str(event.run_id)] = event.state
        if all(states.get(r) in FINAL_STATES for r in run_ids):
            return


async def _run(args, plan) -> int:
    from autorl_tui.commands._display import make_display, print_outcome
    from autorl_tui.daemon.server import serving
    from autorl_tui.store.queries import StoreReader

    engine = engine_from_args(args)
    try:
        await engine.start()
    except InfraError:
        if engine.lock.is_held_by_other():
            holder = engine.lock.holder() or {}
            raise InfraError(f"an engine (pid {holder.get('pid', '?')}) is already running for {engine.home.root}; "
                             f"enqueue the plan through it (`autorl-tui` console, New plan) or stop it first "
                             f"(`autorl-tui engine stop`)") from None
        raise
    interrupt = Interrupt().__enter__()    # left before the engine stops: a second Ctrl-C then ends it
    interrupted = False
    display = make_display(engine, plain=args.plain or not sys.stdout.isatty())
    watchers = contextlib.AsyncExitStack()      # the socket a console attaches to while the plan runs
    try:
        await watchers.enter_async_context(serving(engine))
        try:
            run_ids = await engine.enqueue_plan(plan)
        except UsageError:
            raise
        display.start(run_ids, plan.name)
        waiter = asyncio.create_task(engine.wait_runs(run_ids))
        interrupted = await interrupt.came_first(waiter)
        if interrupted:
            display.note("interrupted: cancelling the plan's runs")
            for rid in run_ids:
                try:
                    await engine.cancel(rid, f"interrupted ({interrupt.name})")
                except UsageError:
                    pass
            await asyncio.wait_for(engine.wait_runs(run_ids), timeout=60)
        rows = [engine.get_run(r) for r in run_ids] if interrupted else waiter.result()
        display.stop()
        outcome = print_outcome(StoreReader.over(engine.store), engine.home.root, rows, plan.name,
                                show_next=not interrupted)
    finally:
        interrupt.__exit__()
        await watchers.aclose()
        await engine.stop(cancel_runs=interrupted)
    if interrupted:
        print(f"interrupted: the plan's runs were cancelled; run one again with "
              f"`autorl-tui --home {engine.home.root} retry RUN` (or press r on it in the console)", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    return int(outcome)

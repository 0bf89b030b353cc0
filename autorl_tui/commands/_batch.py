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

    from autorl_tui.engine.gpus import inventory

    gpus = inventory(getattr(args, "gpus", None)).ids or None
    return Engine(Home.open(args.home), concurrency=getattr(args, "concurrency", None), gpus=gpus,
                  agents_dirs=[Path(p) for p in getattr(args, "agents_dir", [])],
                  tasks_dirs=[Path(p) for p in getattr(args, "tasks_dir", [])], role=role)


def run_batch(args) -> int:
    from autorl_tui.catalog.plans import load_plan
    from autorl_tui.engine.client import engine_is_running
    from autorl_tui.home import Home

    plan = load_plan(args.batch)
    if engine_is_running(Home.open(args.home).root):
        return asyncio.run(_hand_over(args, plan))
    return asyncio.run(_run(args, plan))


async def _hand_over(args, plan) -> int:
    """An engine already owns the home (the console's background engine): give it the plan and
    follow the plan's runs over the socket until they end. Ctrl-C stops following, not the runs."""
    from autorl_tui.commands._display import PlainDisplay, print_outcome
    from autorl_tui.engine.client import Disconnected, EngineClient, Lagged
    from autorl_tui.engine.events import RunStateChanged
    from autorl_tui.home import Home
    from autorl_tui.run_states import FINAL_STATES
    from autorl_tui.store.queries import StoreReader

    home = Home.open(args.home)
    client = await EngineClient.connect(home.root)
    display = PlainDisplay(None)
    try:
        await client.subscribe()
        run_ids = await client.enqueue_plan(plan.source, str(args.batch))
        display.note(f"plan {plan.name} handed to the running engine: {', '.join(run_ids)}")
        states = {r: "queued" for r in run_ids}
        try:
            states.update({r["id"]: r["state"] for r in (await client.snapshot())["runs"] if r["id"] in run_ids})
            async for event in client.events():
                if isinstance(event, Disconnected):
                    raise InfraError("the engine went away while following the plan; its runs go on "
                                     "(re-attach with `autorl-tui`)")
                if isinstance(event, Lagged):
                    states.update({r["id"]: r["state"] for r in (await client.snapshot())["runs"] if r["id"] in run_ids})
                elif event.run_id in run_ids:
                    display.render(event)
                    if isinstance(event, RunStateChanged):
                        states[event.run_id] = event.state
                if all(states.get(r) in FINAL_STATES for r in run_ids):
                    break
        except asyncio.CancelledError:         # Ctrl-C: stop following; the runs are the engine's
            going = [f"{r} ({states.get(r, '?')})" for r in run_ids if states.get(r) not in FINAL_STATES]
            if going:
                h = shlex.quote(str(home.root))
                print(f"stopped following plan {plan.name}; its runs go on in the engine: {', '.join(going)}\n"
                      f"  follow them: autorl-tui --home {h}\n"
                      f"  cancel them: autorl-tui cancel {' '.join(r for r in run_ids if states.get(r) not in FINAL_STATES)}"
                      f" --home {h}", file=sys.stderr, flush=True)
            raise
        rows = [r for r in (await client.snapshot())["runs"] if r["id"] in run_ids]
    finally:
        await client.close()
    with StoreReader.open(home.store_path) as reader:     # the engine is another process's: read-only
        return int(print_outcome(reader, home.root, rows, plan.name))


async def _run(args, plan) -> int:
    from autorl_tui.commands._display import make_display, print_outcome
    from autorl_tui.engine.server import serving
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
    interrupted = False
    loop = asyncio.get_running_loop()
    stop_event = asyncio.Event()

    signal_name = "SIGINT"

    def on_signal(name: str):
        nonlocal interrupted, signal_name
        interrupted, signal_name = True, name
        stop_event.set()

    loop.add_signal_handler(signal.SIGINT, on_signal, "SIGINT")
    loop.add_signal_handler(signal.SIGTERM, on_signal, "SIGTERM")
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
        stopper = asyncio.create_task(stop_event.wait())
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if interrupted:
            display.note("interrupted: cancelling the plan's runs")
            for rid in run_ids:
                try:
                    await engine.cancel(rid, f"interrupted ({signal_name})")
                except UsageError:
                    pass
            await asyncio.wait_for(engine.wait_runs(run_ids), timeout=60)
        stopper.cancel()
        rows = await waiter if waiter.done() else [engine.get_run(r) for r in run_ids]
        display.stop()
        outcome = print_outcome(StoreReader.over(engine.store), engine.home.root, rows, plan.name,
                                show_next=not interrupted)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        loop.remove_signal_handler(signal.SIGTERM)
        await watchers.aclose()
        await engine.stop(cancel_runs=interrupted)
    if interrupted:
        print(f"interrupted: the plan's runs were cancelled; run one again with "
              f"`autorl-tui --home {engine.home.root} retry RUN` (or press r on it in the console)", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    return int(outcome)

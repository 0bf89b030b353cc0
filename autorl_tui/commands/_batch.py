"""`autorl-tui --batch PLAN`: run a plan headless with an in-process engine and exit with a typed
code (0 all done, 1 a run failed/cancelled/lost, 2 usage, 3 infrastructure, 130 interrupted).
Imports no Textual."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
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

    plan = load_plan(args.batch)
    return asyncio.run(_run(args, plan))


async def _run(args, plan) -> int:
    from autorl_tui.commands._display import make_display, print_summary

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

    def on_sigint():
        nonlocal interrupted
        interrupted = True
        stop_event.set()

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    loop.add_signal_handler(signal.SIGTERM, on_sigint)
    display = make_display(engine, plain=args.plain or not sys.stdout.isatty())
    try:
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
                    await engine.cancel(rid, "interrupted (SIGINT)")
                except UsageError:
                    pass
            await asyncio.wait_for(engine.wait_runs(run_ids), timeout=60)
        stopper.cancel()
        rows = await waiter if waiter.done() else [engine.get_run(r) for r in run_ids]
        display.stop()
        print_summary(engine, rows)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        loop.remove_signal_handler(signal.SIGTERM)
        await engine.stop(cancel_runs=interrupted)
    if interrupted:
        return int(ExitCode.INTERRUPTED)
    return int(ExitCode.OK if all(r["state"] == "done" for r in rows) else ExitCode.RUN_FAILED)

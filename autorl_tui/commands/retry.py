"""`autorl-tui retry RUN`: queue a failed, cancelled or lost run again (same task, agent, model,
seed and budget). With an engine running for the home it is handed over and runs there;
otherwise it runs headless here and the command exits with the batch exit codes."""

from __future__ import annotations

import asyncio
import sys

from autorl_tui.exitcodes import ExitCode


def register(subparsers) -> None:
    p = subparsers.add_parser("retry", help="queue a failed, cancelled or lost run again and run it",
                              description="Queue a failed, cancelled or lost run again as a new run. With the "
                                          "home's engine running (the console's), the engine runs it; otherwise "
                                          "it runs here, headless, like --batch.")
    p.add_argument("run_id", metavar="RUN_ID", help="a run id, its short form (r0001) or any unique prefix")
    p.set_defaults(func=run)


def run(args) -> int:
    from autorl_tui.commands._runs import resolve_runs
    from autorl_tui.daemon.client import engine_is_running
    from autorl_tui.home import Home

    home = Home.open(args.home)
    run_id = resolve_runs(home, [args.run_id])[0].id
    if engine_is_running(home.root):
        return asyncio.run(_hand_over(home, run_id))
    return asyncio.run(_retry_here(args, run_id))


async def _hand_over(home, run_id: str) -> int:
    from autorl_tui.daemon.client import EngineClient

    client = await EngineClient.connect(home.root)
    try:
        new_id = await client.retry(run_id)
    finally:
        await client.close()
    print(f"{run_id} queued again as {new_id} on the running engine; follow it with `autorl-tui --home {home.root}`")
    return int(ExitCode.OK)


async def _retry_here(args, run_id: str) -> int:
    from autorl_tui.commands._batch import engine_from_args
    from autorl_tui.commands._display import follow_to_end

    from autorl_tui.daemon.server import serving

    engine = engine_from_args(args, role="retry")
    await engine.start()
    try:
        async with serving(engine):
            new_id = await engine.retry(run_id)
            rows = await follow_to_end(engine, [new_id], f"retry of {run_id}", plain=not sys.stdout.isatty())
    finally:
        await engine.stop()
    return int(ExitCode.OK if all(r["state"] == "done" for r in rows) else ExitCode.RUN_FAILED)

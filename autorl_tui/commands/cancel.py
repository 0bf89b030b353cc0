"""`autorl-tui cancel RUN...`: end runs now, whatever their state (queued, preparing, baseline,
running, paused, finalizing). Handed to the home's engine when one runs; otherwise an engine starts
here with its queue paused (it re-adopts what a dead engine left, starts nothing new), cancels the
runs, waits for them to end and stops."""

from __future__ import annotations

import asyncio
import time

from autorl_tui.exitcodes import ExitCode, UsageError
from autorl_tui.run_states import FINAL_STATES as FINAL


def register(subparsers) -> None:
    p = subparsers.add_parser("cancel", help="cancel runs, in any state",
                              description="Cancel runs in any state: a queued run never starts, a preparing "
                                          "one stops its preparation, a running agent is killed. Uses the home's "
                                          "engine when one runs, else starts one here (queue paused) to do it.")
    p.add_argument("run_ids", nargs="+", metavar="RUN_ID", help="run ids, short forms (r0001) or unique prefixes")
    p.add_argument("--reason", default="cancelled by the operator (autorl-tui cancel)",
                   help="recorded as the run's end reason")
    p.add_argument("--wait", type=float, default=120.0, metavar="SECONDS",
                   help="how long to wait for the runs to end (default 120)")
    p.set_defaults(func=run)


def run(args) -> int:
    from autorl_tui.commands._runs import resolve_runs
    from autorl_tui.daemon.client import engine_is_running
    from autorl_tui.home import Home

    home = Home.open(args.home)
    runs = resolve_runs(home, args.run_ids)
    run_ids = [r.id for r in runs]
    states = {r.id: r.state for r in runs}
    ended = [f"{rid} ({state})" for rid, state in states.items() if state in FINAL]
    if ended:
        raise UsageError(f"nothing to cancel: {', '.join(ended)} already ended; `autorl-tui runs list` shows "
                         "which runs are queued or active")
    if engine_is_running(home.root):
        final = asyncio.run(_through_engine(home, run_ids, args.reason, args.wait))
    else:
        final = asyncio.run(_here(args, run_ids))
    for rid in run_ids:
        print(f"{rid}: {states[rid]} → {final.get(rid, 'still ' + states[rid])}")
    return int(ExitCode.OK if all(final.get(rid) == "cancelled" for rid in run_ids) else ExitCode.RUN_FAILED)


async def _through_engine(home, run_ids: list[str], reason: str, wait_s: float) -> dict[str, str]:
    from autorl_tui.daemon.client import EngineClient

    client = await EngineClient.connect(home.root)
    try:
        for rid in run_ids:
            await client.cancel(rid, reason)
        deadline = time.monotonic() + wait_s
        while True:
            runs = {r["id"]: r["state"] for r in (await client.snapshot())["runs"] if r["id"] in run_ids}
            if all(state in FINAL for state in runs.values()) or time.monotonic() > deadline:
                return {rid: state for rid, state in runs.items() if state in FINAL}
            await asyncio.sleep(0.2)
    finally:
        await client.close()


async def _here(args, run_ids: list[str]) -> dict[str, str]:
    from autorl_tui.commands._batch import engine_from_args

    engine = engine_from_args(args, role="cancel")
    engine.queue_paused = True          # re-adopt what lives, start nothing new
    await engine.start()
    try:
        for rid in run_ids:
            await engine.cancel(rid, args.reason)
        try:
            rows = await asyncio.wait_for(engine.wait_runs(run_ids), args.wait)
        except asyncio.TimeoutError:
            rows = [engine.store.run(rid) for rid in run_ids]
        return {r["id"]: r["state"] for r in rows if r["state"] in FINAL}
    finally:
        await engine.stop()

"""`autorl-tui resume`: headless recovery. Starts an engine for the home, which re-adopts runs a
dead engine left behind (agents still running, or ended while it was down) and finishes them
and anything queued, then exits with the batch exit codes."""

from __future__ import annotations

import asyncio

from autorl_tui.exitcodes import ExitCode


def register(subparsers) -> None:
    p = subparsers.add_parser("resume", help="re-adopt and finish runs left by a dead engine, headless")
    p.set_defaults(func=run)


def run(args) -> int:
    return asyncio.run(_resume(args))


async def _resume(args) -> int:
    import sys

    from autorl_tui.commands._batch import engine_from_args
    from autorl_tui.commands._display import follow_to_end
    from autorl_tui.run_states import ACTIVE_STATES, UNSUCCESSFUL_STATES

    engine = engine_from_args(args, role="resume")
    await engine.start()
    try:
        run_ids = [r["id"] for r in engine.runs(list(ACTIVE_STATES) + ["queued"])]
        if not run_ids:
            print(nothing_to_resume(engine.home.root, engine.runs(list(UNSUCCESSFUL_STATES))))
            return int(ExitCode.OK)
        rows = await follow_to_end(engine, run_ids, "resume",
                                   plain=getattr(args, "plain", False) or not sys.stdout.isatty())
    finally:
        await engine.stop()
    return int(ExitCode.OK if all(r["state"] == "done" for r in rows) else ExitCode.RUN_FAILED)


def nothing_to_resume(home_root, ended: list[dict]) -> str:
    """What to say when no run is queued or active: the runs that ended badly and how to retry them."""
    text = f"nothing to resume in {home_root}: no run is queued or active"
    if not ended:
        return text
    lines = [f"{text}; runs that ended without finishing (newest first):"]
    lines += [f"  {r['id']}  {r['state']}" + (f" ({r['end_reason']})" if r.get("end_reason") else "")
              for r in ended[:5]]
    if len(ended) > 5:
        lines.append(f"  ... and {len(ended) - 5} more (`autorl-tui runs list --home {home_root}`)")
    lines.append(f"retry one with `autorl-tui --home {home_root} retry {ended[0]['id']}` "
                 f"(or select it in the console's Runs screen and press r)")
    return "\n".join(lines)

"""`autorl-tui engine start|stop|status|serve`: the detached engine of a home."""

from __future__ import annotations

import asyncio
import time

from autorl_tui.durations import format_duration
from autorl_tui.exitcodes import ExitCode


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "engine", help="start, stop or inspect the background engine of this home",
        description="The engine runs in the background (one per home) so that runs outlive the console. "
                    "`autorl-tui` attaches to it, starting it when needed.")
    sub = parser.add_subparsers(dest="engine_command", metavar="ACTION", required=True)
    start = sub.add_parser("start", help="start the engine in the background (no-op if one runs)")
    start.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for it to answer")
    stop = sub.add_parser("stop", help="stop the engine; runs keep going and are re-adopted on the next start")
    stop.add_argument("--cancel-runs", action="store_true", help="cancel every active run first")
    stop.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the process to exit")
    sub.add_parser("status", help="pid, uptime, runs active and queued (exit code 3 when no engine runs)")
    sub.add_parser("serve", help="run the engine in the foreground (what `start` runs in the background)")
    parser.set_defaults(func=run)


def run(args) -> int:
    from autorl_tui import store_location
    from autorl_tui.daemon.daemon import EngineOptions, log_path, serve, start_daemon, stop_daemon
    from autorl_tui.home import Home

    home = Home.open(args.home)
    store_location.check_here(home.root, home.store)    # a home's engine runs on its store's machine
    action = args.engine_command
    if action == "serve":
        return asyncio.run(serve(home, EngineOptions.from_args(args)))
    if action == "start":
        info = start_daemon(home, EngineOptions.from_args(args), timeout=args.timeout)
        print(f"engine running: pid {info['pid']}, home {home.root}{_store_note(home)}, log {log_path(home)}")
        return 0
    if action == "stop":
        answer = stop_daemon(home, cancel_runs=args.cancel_runs, timeout=args.timeout)
        if answer is None:
            print(f"no engine is running for home {home.root}")
            return 0
        what = "active runs cancelled" if args.cancel_runs else "runs keep going and are re-adopted by the next engine"
        print(f"engine pid {answer['pid']} stopped; {what}")
        return 0
    return _status(home)


def _store_note(home) -> str:
    """The store, named when it lives outside the home (docs/cluster.md)."""
    return f", store {home.store.path}" if home.store.recorded else ""


def _status(home) -> int:
    from autorl_tui.daemon.client import EngineClient, EngineNotRunning

    async def ask():
        client = await EngineClient.connect(home)
        try:
            return await client.status()
        finally:
            await client.close()

    try:
        st = asyncio.run(ask())
    except EngineNotRunning as exc:
        print(str(exc))
        return int(ExitCode.INFRA)
    role = st.get("role") or "engine"
    inside = "" if role == "engine" else f" (inside `autorl-tui {'--batch' if role == 'batch' else role}`)"
    print(f"engine pid {st['pid']}{inside}, up {format_duration(time.time() - st['started_at'])}, home {home.root}"
          f"{_store_note(home)}")
    print(f"runs: {st['active']} active, {st['queued']} queued, {st['total']} total"
          f"{'; queue paused' if st.get('queue_paused') else ''}; {st['clients'] - 1} other client(s) attached")
    return 0

"""The bare `autorl-tui`: attach the console to this home's engine, starting one in the background
if none runs. Quitting the console leaves the engine and its runs going."""

from __future__ import annotations


def run_console(args) -> int:
    from autorl_tui.daemon.daemon import EngineOptions, start_daemon
    from autorl_tui.home import Home

    home = Home.open(args.home)
    start_daemon(home, EngineOptions.from_args(args))
    from autorl_tui.tui.app import ConsoleApp   # Textual is imported only here

    ConsoleApp(home).run()
    return 0

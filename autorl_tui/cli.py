"""Command-line entry point.

`autorl-tui` with no command opens the console (attaching to, or starting, the home's engine);
`autorl-tui --batch PLAN` runs a plan headless. Every other command is a module in
`autorl_tui/commands/` exposing `register(subparsers)`, a plugin of kind `commands` (registry.py);
commands import their heavy parts lazily so that `--batch` and reports never import Textual.
"""

from __future__ import annotations

import argparse
import os
import sys

from autorl_tui import __version__, registry, settings, store_location
from autorl_tui.exitcodes import ExitCode, InfraError, UsageError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autorl-tui",
        description="Operator console and headless harness for agentic RL post-training benchmarks.")
    parser.add_argument("--version", action="version", version=f"autorl-tui {__version__}")
    parser.add_argument("--home", help="home directory (store, caches, workspaces); default $AUTORL_HOME "
                                       "or ~/.local/share/autorl-tui")
    parser.add_argument("--store", metavar="PATH",
                        help="the store (SQLite) on this machine's local disk instead of HOME/store.db; recorded "
                             "in the home, so later commands find it (sets $AUTORL_STORE; docs/cluster.md)")
    parser.add_argument("--batch", metavar="PLAN", help="run PLAN (YAML) headless and exit with a typed code")
    parser.add_argument("--agents-dir", action="append", default=[], help="extra folder of agent specs")
    parser.add_argument("--tasks-dir", action="append", default=[], help="extra folder of task cards")
    parser.add_argument("--plain", action="store_true", help="with --batch: plain log lines instead of rich progress")
    parser.add_argument("--concurrency", type=int, default=None, help="with --batch: concurrent CPU runs")
    parser.add_argument("--gpus", default=None, help="declare GPUs instead of NVML discovery: '0,1,2' or 'none'")
    parser.add_argument("--judge-url", default=None,
                        help="OpenAI-compatible endpoint for judge-scored tasks (sets $AUTORL_JUDGE_URL for graders)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in registry.names("commands"):   # built-in commands and installed plugins' ones
        registry.load("commands", name)(subparsers)
    _accept_home_anywhere(subparsers)
    return parser


def _accept_home_anywhere(subparsers) -> None:
    """`--home` and `--store` are read after the command too (`autorl-tui runs list --home X`), at any
    depth of sub-commands. SUPPRESS keeps a value given before the command when none is given after it."""
    for sub in subparsers.choices.values():
        for flag, what in (("--home", "home directory"), ("--store", "the home's store")):
            if not any(flag in a.option_strings for a in sub._actions):
                sub.add_argument(flag, default=argparse.SUPPRESS, help=f"{what} (may also come before the command)")
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                _accept_home_anywhere(action)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help exits 0, bad usage exits 2
        return int(exc.code or 0)
    if getattr(args, "judge_url", None):   # graders (subprocesses) read it when the card sets no judge_url
        os.environ["AUTORL_JUDGE_URL"] = args.judge_url
    try:
        store_before = settings.current().store   # a bad AUTORL_* value: one line and exit 2, before anything starts
    except UsageError as exc:
        print(f"autorl-tui: error: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    wanted = getattr(args, "store", None) or store_before
    if wanted:      # Home.open reads it (settings.current().store), and so does an engine started from here, in
        # the home as its folder: made absolute here, it names the same file there
        os.environ["AUTORL_STORE"] = str(store_location.requested_path(wanted))
    try:
        return _dispatch(args)
    finally:
        if store_before is None:           # main() called in-process (tests) leaves the environment as it was
            os.environ.pop("AUTORL_STORE", None)
        else:
            os.environ["AUTORL_STORE"] = store_before


def _dispatch(args) -> int:
    try:
        if args.batch:
            if args.command:
                raise UsageError("--batch PLAN takes no other command")
            from autorl_tui.commands._batch import run_batch

            return int(run_batch(args))
        if args.command is None:
            from autorl_tui.commands._console import run_console

            return int(run_console(args))
        return int(args.func(args) or 0)
    except (UsageError, registry.PluginError) as exc:     # PluginError: a card or plan names a plugin that is not there
        print(f"autorl-tui: error: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    except InfraError as exc:
        print(f"autorl-tui: infrastructure error: {exc}", file=sys.stderr)
        return int(ExitCode.INFRA)
    except KeyboardInterrupt:
        print("autorl-tui: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        # The reader went away (`runs list --json | head`): stop quietly. stdout is pointed at
        # /dev/null so that the interpreter's final flush does not fail a second time.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return int(ExitCode.OK)


if __name__ == "__main__":
    sys.exit(main())

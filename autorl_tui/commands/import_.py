"""`autorl-tui import autorl-bench PATH...`: another harness's runs into this home's store."""

from __future__ import annotations

import sys
from pathlib import Path

from autorl_tui.exitcodes import UsageError


def register(subparsers) -> None:
    p = subparsers.add_parser("import", help="import runs from another harness (AutoRL-Bench)",
                              description="Read AutoRL-Bench run folders (run_meta.json, scores.json, agent.log, "
                                          "agent.jsonl, code/) and results.csv files into the store as runs marked "
                                          "imported. Idempotent: a run already imported is left alone. A malformed "
                                          "file is reported with its line and its run skipped whole.")
    p.add_argument("format", choices=["autorl-bench"], help="the other harness's format")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="run folders, folders holding them (its workspace/), or results.csv files")
    p.set_defaults(func=run)


def run(args) -> int:
    from autorl_tui.home import EngineLock, Home
    from autorl_tui.interop.autorl_bench_import import import_paths
    from autorl_tui.store.db import Store, StoreError

    home = Home.open(args.home)
    lock = EngineLock(home)
    lock.acquire("import")      # the store has one writer: an engine running on this home must stop first
    try:
        try:
            store = Store(home.writer_store_path())
        except StoreError as exc:
            raise UsageError(str(exc)) from None
        try:
            report = import_paths(store, [Path(p) for p in args.paths])
        finally:
            store.close()
    finally:
        lock.release()
    for problem in report.problems:
        print(f"skipped: {problem}", file=sys.stderr)
    for run_id in report.imported:
        print(f"imported {run_id}")
    for run_id in report.already:
        print(f"already imported {run_id}")
    print(f"{len(report.imported)} imported, {len(report.already)} already there, {len(report.problems)} problem(s)")
    return 2 if report.problems else 0      # bad input was skipped: say so in the exit status too

"""`autorl-tui export RUN_ID --json FILE`: everything about a run, machine-readable."""

from __future__ import annotations

import sys

from autorl_tui.exitcodes import UsageError


def register(subparsers) -> None:
    p = subparsers.add_parser("export", help="export everything about a run as JSON")
    p.add_argument("run_id", metavar="RUN_ID", help="a run id, its short form (r0001) or any unique prefix")
    p.add_argument("--json", required=True, metavar="FILE", help="output file ('-' for stdout)")
    p.add_argument("--no-events", action="store_true", help="leave out the event log")
    p.add_argument("--no-samples", action="store_true", help="leave out per-sample grading results")
    p.set_defaults(func=run)


def run(args) -> int:
    import json

    from autorl_tui.home import Home
    from autorl_tui.store.db import StoreError, open_readonly
    from autorl_tui.store.export import export_run, write_json_atomic
    from autorl_tui.store.run_ids import resolve_run_id_sqlite

    home = Home.open(args.home, create=False)
    try:
        conn = open_readonly(home.store_path)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    run_id = resolve_run_id_sqlite(conn, args.run_id, str(home.root))
    try:
        data = export_run(conn, run_id, include_events=not args.no_events, include_samples=not args.no_samples)
    except KeyError:
        raise UsageError(f"no run {run_id!r} in {home.root}; `autorl-tui runs list` shows them") from None
    if args.json == "-":
        json.dump(data, sys.stdout, indent=1, default=str)
        print()
    else:
        write_json_atomic(args.json, data)
        print(f"wrote {args.json}")
    return 0

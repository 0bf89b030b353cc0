"""`autorl-tui export RUN_ID --json FILE`: everything about a run, machine-readable.
`autorl-tui export --format autorl-bench --out DIR [RUN_ID...]`: finished runs in AutoRL-Bench's
shape (results.csv, per run run_meta.json, scores.json, reports/metrics.json)."""

from __future__ import annotations

import sys

from autorl_tui.exitcodes import UsageError


def register(subparsers) -> None:
    p = subparsers.add_parser("export", help="export everything about a run as JSON, or runs in AutoRL-Bench's shape")
    p.add_argument("run_id", nargs="*", help="a run id, its short form (r0001) or any unique prefix "
                   "(json: exactly one; autorl-bench: default every finished run)")
    p.add_argument("--format", choices=["json", "autorl-bench"], default="json")
    p.add_argument("--json", metavar="FILE", help="output file ('-' for stdout); for --format json")
    p.add_argument("--out", metavar="DIR", help="output folder; for --format autorl-bench")
    p.add_argument("--no-events", action="store_true", help="leave out the event log")
    p.add_argument("--no-samples", action="store_true", help="leave out per-sample grading results")
    p.set_defaults(func=run)


def run(args) -> int:
    import json

    from autorl_tui.home import Home
    from autorl_tui.store.db import StoreError
    from autorl_tui.store.export import write_json_atomic
    from autorl_tui.store.queries import StoreReader
    from autorl_tui.run_ids import resolve_run_id

    if args.format == "autorl-bench":
        return _autorl_bench(args)
    if len(args.run_id) != 1 or not args.json:
        raise UsageError("export takes one RUN_ID and --json FILE (or --format autorl-bench --out DIR)")
    args.run_id = args.run_id[0]
    home = Home.open(args.home, create=False)
    try:
        reader = StoreReader.open(home.store_path)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    with reader:
        run_id = resolve_run_id(reader, args.run_id, str(home.root))
        try:
            data = reader.export_run(run_id, include_events=not args.no_events, include_samples=not args.no_samples)
        except KeyError:
            raise UsageError(f"no run {run_id!r} in {home.root}; `autorl-tui runs list` shows them") from None
    if args.json == "-":
        json.dump(data, sys.stdout, indent=1, default=str)
        print()
    else:
        write_json_atomic(args.json, data)
        print(f"wrote {args.json}")
    return 0


def _autorl_bench(args) -> int:
    from pathlib import Path

    from autorl_tui.home import Home
    from autorl_tui.interop.autorl_bench_export import export
    from autorl_tui.store.db import StoreError
    from autorl_tui.store.queries import StoreReader
    from autorl_tui.run_ids import resolve_run_id

    if not args.out:
        raise UsageError("--format autorl-bench writes a folder: give --out DIR")
    home = Home.open(args.home, create=False)
    try:
        reader = StoreReader.open(home.store_path)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    with reader:
        wanted = [resolve_run_id(reader, r, str(home.root)) for r in args.run_id]
        ids = export(reader, Path(args.out), wanted or None)
    print(f"wrote {Path(args.out) / 'results.csv'} and {len(ids)} run folder(s) under {Path(args.out) / 'workspace'}")
    return 0

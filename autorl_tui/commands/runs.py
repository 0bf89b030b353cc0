"""`autorl-tui runs list [--json] [--limit N [--offset N]]`: the queue and history of this home
(a page of it with --limit).
`autorl-tui runs prune [RUN ...] [--keep-last N] [--dry-run] [--json]`: reclaim snapshot disk of
ended runs (policy: grading_host/snapshot_retention.py)."""

from __future__ import annotations

import json
import sys
import time

from autorl_tui.durations import format_duration
from autorl_tui.run_states import ACTIVE_STATES as ACTIVE, FINAL_STATES
from autorl_tui.exitcodes import UsageError

COLUMNS = ("id", "state", "task", "agent", "model", "seed", "budget_s", "baseline_score", "best_dev_score",
           "test_score", "improvement", "end_reason")


def register(subparsers) -> None:
    p = subparsers.add_parser("runs", help="list runs")
    sub = p.add_subparsers(dest="runs_command", metavar="ACTION")
    lst = sub.add_parser("list", help="list runs, newest first")
    lst.add_argument("--json", action="store_true", help="machine-readable output")
    lst.add_argument("--state", action="append", help="only runs in this state (repeatable)")
    lst.add_argument("--plan", help="only runs of this plan name")
    lst.add_argument("--limit", type=int, default=None, metavar="N", help="at most N runs (a page; default: all)")
    lst.add_argument("--offset", type=int, default=0, metavar="N", help="with --limit: skip the newest N first")
    lst.set_defaults(func=list_runs)
    prune = sub.add_parser("prune", help="delete submission snapshots of ended runs, keeping the selected, the "
                                         "best and the last N (every content hash stays), and partial copies "
                                         "an interrupted snapshot left")
    prune.add_argument("runs", nargs="*", metavar="RUN", help="run ids (default: every ended run)")
    prune.add_argument("--keep-last", type=int, default=None, metavar="N",
                       help="also keep the last N snapshots of each run (default 3)")
    prune.add_argument("--dry-run", action="store_true", help="say what would be deleted, delete nothing")
    prune.add_argument("--json", action="store_true", help="machine-readable output")
    prune.set_defaults(func=prune_runs)
    p.set_defaults(func=list_runs, json=False, state=None, plan=None, limit=None, offset=0)   # bare `runs` lists too


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.1f}"
    return str(v)


def list_runs(args) -> int:
    from autorl_tui.home import EngineLock, Home
    from autorl_tui.store.db import StoreError
    from autorl_tui.store.isolation import recorded_exposures, recorded_isolation
    from autorl_tui.store.queries import StoreReader

    if (args.limit is not None and args.limit < 1) or args.offset < 0 or (args.offset and args.limit is None):
        raise UsageError("runs list: --limit takes a page size of 1 or more, --offset (with --limit) 0 or more; "
                         "e.g. `runs list --limit 50 --offset 50` for the second page of 50")
    home = Home.open(args.home, create=False)
    records, last_event = [], {}
    if home.store_path.exists():
        try:
            reader = StoreReader.open(home.store_path)
        except StoreError as exc:
            raise UsageError(str(exc)) from None
        with reader:
            records = reader.runs(states=args.state or (), plan=args.plan or None, limit=args.limit,
                                  offset=args.offset)
            last_event = {r.id: reader.last_event_at(r.id) for r in records if r.state in ACTIVE}
    engine_alive = EngineLock(home).held()
    rows = [{**r.to_dict(), "isolation": recorded_isolation(r.spec, r.executor),
             "protocol": r.spec.protocol_name or "default", "exposures": recorded_exposures(r.spec),
             **({"last_event_at": last_event[r.id], "engine_holds_home": engine_alive} if r.id in last_event else {})}
            for r in records]
    stale = [r for r in rows if "last_event_at" in r and not engine_alive]
    if stale:       # said first, on stderr: pipes and --json keep their shape
        now = time.time()
        ages = [now - r["last_event_at"] for r in stale if r["last_event_at"]]
        since = f"; the newest of their events is {format_duration(min(ages))} old" if ages else ""
        print(f"no engine holds {home.root}: {len(stale)} run(s) recorded as "
              f"{'/'.join(sorted({r['state'] for r in stale}))} are not being watched{since}; "
              f"`autorl-tui resume --home {home.root}` re-adopts them", file=sys.stderr)
    if args.json:
        for r in rows:
            r.pop("spec", None)
        json.dump(rows, sys.stdout, indent=1)
        print()
        return 0
    if not rows:
        print(f"no runs in {home.root}")
        return 0
    table = [(col, [cell(r) for r in rows]) for col, cell in TABLE]
    if not sys.stdout.isatty():   # pipes and files: every column, full values, tab-separated
        print("\t".join(col for col, _ in table))
        for i in range(len(rows)):
            print("\t".join(values[i] for _, values in table))
        return 0
    import shutil
    import textwrap

    width = shutil.get_terminal_size().columns
    shown, hidden = fit_columns(table, width)
    print(textwrap.fill(f"runs in {home.root}", width, break_long_words=True))
    widths = [max(len(col), *map(len, values)) for col, values in shown]
    print("  ".join(col.ljust(w) for (col, _), w in zip(shown, widths)).rstrip())
    for i in range(len(rows)):
        print("  ".join(values[i].ljust(w) for (_, values), w in zip(shown, widths)).rstrip())
    if hidden:
        print(textwrap.fill(f"({len(hidden)} column(s) left out to fit the width: {', '.join(hidden)}; "
                            f"a wider terminal, a pipe (tab-separated) or --json shows all)", width))
    return 0


def _ended(r) -> str:
    return time.strftime("%H:%M:%S", time.localtime(r["ended_at"])) if r["ended_at"] else "-"


# (header, cell) in display order; DROP_ORDER says which go first when the terminal is narrow:
# the id and state never, the scores last.
TABLE = (
    ("run", lambda r: r["id"] + (" UNISOLATED" if r.get("isolation") == "none" else "")
     + (" EXPOSED" if r.get("exposures") else "")),
    ("state", lambda r: r["state"] + (f" (waiting for {r['waiting']})" if r.get("waiting") else "")),
    ("task", lambda r: r["task"]),
    ("agent", lambda r: r["agent"]),
    ("model", lambda r: r["model"]),
    ("seed", lambda r: str(r["seed"])),
    ("budget", lambda r: f"{r['budget_s']:.0f}s"),
    # Like beside like: the base model's dev score beside the best dev, its test score beside the
    # selected submission's test score, and Δ = test - base test.
    ("base dev", lambda r: _fmt(r.get("baseline_dev_score"))),
    ("best dev", lambda r: _fmt(r["best_dev_score"])),
    ("base test", lambda r: _fmt(r["baseline_score"])),
    ("test", lambda r: "imported: no test" if r.get("imported_from") else _fmt(r["test_score"])),
    ("Δ test", lambda r: _fmt(r["improvement"])),
    ("ended", _ended),
)
DROP_ORDER = ("ended", "model", "budget", "seed", "agent", "task", "base dev", "base test", "Δ test", "best dev",
              "test")


def fit_columns(table: list[tuple[str, list[str]]], width: int) -> tuple[list, list[str]]:
    """The columns that fit in `width` (two spaces between columns), dropping them in DROP_ORDER;
    ids are never cut."""
    shown = list(table)
    hidden: list[str] = []

    def total() -> int:
        return sum(max(len(col), *map(len, values)) for col, values in shown) + 2 * (len(shown) - 1)

    for name in DROP_ORDER:
        if total() <= width:
            break
        shown = [c for c in shown if c[0] != name]
        hidden.append(name)
    return shown, hidden


def _copies_older_than(home, started: float) -> float | None:
    """Before when an orphaned partial copy was made, to be pruned: the start of the engine that
    holds the home (its own copies are younger), or this prune's start when none does (an engine
    that starts meanwhile makes younger ones). None, pruning none, when the holder's start is unknown."""
    from autorl_tui.home import EngineLock

    lock = EngineLock(home)
    if not lock.held():
        return started
    since = (lock.holder() or {}).get("since")
    return float(since) if isinstance(since, (int, float)) and not isinstance(since, bool) else None


def prune_runs(args) -> int:
    from autorl_tui.grading_host import snapshot_retention as sr
    from autorl_tui.home import Home
    from autorl_tui.store.db import StoreError
    from autorl_tui.store.queries import StoreReader

    started = time.time()
    keep_last = sr.DEFAULT_KEEP_LAST if args.keep_last is None else args.keep_last
    if keep_last < 0:
        raise UsageError(f"--keep-last must be 0 or more (got {keep_last})")
    home = Home.open(args.home, create=False)
    if not home.store_path.exists():
        raise UsageError(f"no store in {home.root}: nothing was run in this home (check --home)")
    try:
        reader = StoreReader.open(home.store_path)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    with reader:
        runs = {r.id: {"id": r.id, "state": r.state, "best_submission_id": r.best_submission_id}
                for r in reader.runs()}
        subs_of = {r: [{"id": s.id, "seq": s.seq, "status": s.status, "score": s.score,
                        "snapshot_path": s.snapshot_path} for s in reader.submissions(r)] for r in runs}
    unknown = [r for r in args.runs if r not in runs]
    if unknown:
        raise UsageError(f"no run {', '.join(unknown)} in {home.root} (see `autorl-tui runs list`)")
    active = [f"{r} ({runs[r]['state']})" for r in args.runs if runs[r]["state"] not in FINAL_STATES]
    if active:
        raise UsageError(f"run {', '.join(active)} has not ended: its snapshots may still be graded; prune it "
                         f"after it ends")
    chosen = args.runs or sorted(r for r, row in runs.items() if row["state"] in FINAL_STATES)
    incoming_before = _copies_older_than(home, started)
    plans = []
    for run_id in chosen:
        plans.append(sr.plan_run(home.snapshots / run_id, runs[run_id], subs_of[run_id], keep_last, incoming_before))
    if not args.dry_run:
        for plan in plans:
            if plan.drop or plan.orphans or plan.partials:
                sr.apply(home.snapshots / plan.run_id, plan)
    total = sum(p.freed_bytes for p in plans)
    if args.json:
        json.dump({"dry_run": args.dry_run, "freed_bytes": total,
                   "runs": [{"run": p.run_id, "keep": p.keep, "drop": p.drop, "orphans": p.orphans,
                             "partials": p.partials,
                             "freed_bytes": p.freed_bytes} for p in plans]}, sys.stdout, indent=1)
        print()
        return 0
    verb = "would delete" if args.dry_run else "deleted"
    for p in plans:
        if p.drop:
            print(f"{p.run_id}: {verb} snapshots {', '.join(map(str, p.drop))} ({p.freed_bytes / 2**20:.1f} MiB); "
                  f"kept {', '.join(map(str, p.keep)) or 'none'}")
        if p.orphans:
            print(f"{p.run_id}: {verb} {len(p.orphans)} partial cop{'y' if len(p.orphans) == 1 else 'ies'} "
                  f"an interrupted snapshot left in {sr.BLOBS}/")
        if p.partials:
            print(f"{p.run_id}: {verb} {len(p.partials)} half-made snapshot folder(s) an interrupted intake left: "
                  f"{', '.join(p.partials)}")
    print(f"{verb} {sum(len(p.drop) for p in plans)} snapshot(s) of {len(plans)} run(s), "
          f"{total / 2**20:.1f} MiB {'to reclaim' if args.dry_run else 'reclaimed'}; content hashes are kept")
    return 0

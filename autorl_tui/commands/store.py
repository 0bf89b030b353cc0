"""`autorl-tui store [--json]`: where this home's store lives (path, machine, filesystem);
`autorl-tui store move PATH`: move it, with no engine running, to PATH on this machine's local disk
(or back into the home), and record it. docs/cluster.md, "What must be shared, and why"."""

from __future__ import annotations

import json
import os

from autorl_tui.exitcodes import InfraError, UsageError


def register(subparsers) -> None:
    p = subparsers.add_parser("store", help="where the home's store lives; move it to local disk",
                              description="The store (SQLite) lives on the engine's local disk; the home records "
                                          "where (HOME/store.location). See docs/cluster.md.")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=show)
    sub = p.add_subparsers(dest="store_cmd", metavar="ACTION")
    move = sub.add_parser("move", help="move the store (no engine may run) to PATH on this machine and record it")
    move.add_argument("path", metavar="PATH", help="the new store file, or a folder to hold store.db")
    move.set_defaults(func=run_move)


def show(args) -> int:
    from autorl_tui import store_location
    from autorl_tui.home import Home

    home = Home.open(args.home, create=False)
    report = store_location.report(home.root, home.store)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    where = f"filesystem {report['filesystem']} ({report['f_type']})" if report["here"] else f"on {report['host']}"
    recorded = f", recorded in {home.root / store_location.RECORD}" if report["recorded"] else ", inside the home"
    print(f"store: {report['path']} ({where}{recorded}{'' if report['exists'] is not False else '; not created yet'})")
    if report["note"]:
        print(f"  {report['note']}")
    return 0


def run_move(args) -> int:
    from autorl_tui import store_location
    from autorl_tui.home import EngineLock, Home
    from autorl_tui.store.copy import copy_whole
    from autorl_tui.store.db import StoreError

    home = Home.open(args.home)
    old = home.store
    store_location.check_here(home.root, old)
    if not old.path.exists():
        raise UsageError(f"no store at {old.path} to move (nothing has run in home {home.root} yet): name the new "
                         f"place with --store PATH when you start the engine instead")
    target = store_location.requested_path(args.path)
    if os.path.realpath(target) == os.path.realpath(old.path):
        print(f"the store is already at {target}")
        return 0
    in_home = target == home.root / store_location.IN_HOME
    new = store_location.StoreLocation(target) if in_home else \
        store_location.StoreLocation(target, True, *store_location.this_machine())
    if target.exists():
        raise UsageError(f"{target} exists: name a path that does not (the move never overwrites a file)")
    store_location.refuse_network(home.root, target)
    if not in_home:
        store_location.refuse_other_owner(home.root, target)
    lock = EngineLock(home)
    lock.acquire("store move")          # no engine writes while the store moves (exit 3 if one runs)
    try:
        try:
            copy_whole(old.path, target)
        except StoreError as exc:
            raise InfraError(f"{exc}; the store was not moved") from None
        if in_home:
            (home.root / store_location.RECORD).unlink(missing_ok=True)
        else:
            store_location.record(home.root, new)
        for leftover in (old.path, *(old.path.with_name(old.path.name + s) for s in ("-wal", "-shm", ".owner"))):
            leftover.unlink(missing_ok=True)
    finally:
        lock.release()
    print(f"store moved: {old.path} -> {target}" + ("" if in_home else
          f" (recorded in {home.root / store_location.RECORD}; later commands on this machine find it)"))
    return 0


"""`autorl-tui runs list [--json]`: the queue and history of this home."""

from __future__ import annotations

import json
import sys
import time

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
    lst.set_defaults(func=list_runs)
    p.set_defaults(func=list_runs, json=False, state=None, plan=None)   # bare `runs` lists too


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.1f}"
    return str(v)


def list_runs(args) -> int:
    from autorl_tui.home import Home
    from autorl_tui.store.db import StoreError, open_readonly

    home = Home.open(args.home, create=False)
    if not home.store_path.exists():
        rows = []
    else:
        try:
            conn = open_readonly(home.store_path)
        except StoreError as exc:
            raise UsageError(str(exc)) from None
        sql, params = "SELECT * FROM runs", []
        where = []
        if args.state:
            where.append(f"state IN ({', '.join('?' for _ in args.state)})")
            params += args.state
        if args.plan:
            where.append("plan_name = ?")
            params.append(args.plan)
        if where:
            sql += " WHERE " + " AND ".join(where)
        rows = [dict(r) for r in conn.execute(sql + " ORDER BY created_at DESC, id DESC", params)]
    from autorl_tui.catalog.plans import recorded_isolation

    for r in rows:
        try:
            spec = json.loads(r.get("spec") or "{}")
        except ValueError:
            spec = {}
        r["isolation"] = recorded_isolation(spec, r.get("executor"))
    if args.json:
        for r in rows:
            r.pop("spec", None)
        json.dump(rows, sys.stdout, indent=1)
        print()
        return 0
    if not rows:
        print(f"no runs in {home.root}")
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"runs in {home.root}")
    for col in ("run", "state", "task", "agent", "model", "seed", "budget", "baseline", "best dev", "test", "Δ", "ended"):
        table.add_column(col)
    for r in rows:
        run_cell = r["id"] + (" [bold red]UNISOLATED[/]" if r["isolation"] == "none" else "")
        table.add_row(run_cell, r["state"], r["task"], r["agent"], r["model"], str(r["seed"]), f"{r['budget_s']:.0f}s",
                      _fmt(r["baseline_score"]), _fmt(r["best_dev_score"]), _fmt(r["test_score"]),
                      _fmt(r["improvement"]), time.strftime("%H:%M:%S", time.localtime(r["ended_at"])) if r["ended_at"] else "-")
    Console().print(table)
    return 0

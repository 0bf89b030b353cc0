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
    from autorl_tui.store.db import StoreError
    from autorl_tui.store.isolation import recorded_isolation
    from autorl_tui.store.queries import StoreReader

    home = Home.open(args.home, create=False)
    records = []
    if home.store_path.exists():
        try:
            reader = StoreReader.open(home.store_path)
        except StoreError as exc:
            raise UsageError(str(exc)) from None
        with reader:
            records = reader.runs(states=args.state or (), plan=args.plan or None)
    rows = [{**r.to_dict(), "isolation": recorded_isolation(r.spec, r.executor)} for r in records]
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
    ("run", lambda r: r["id"] + (" UNISOLATED" if r.get("isolation") == "none" else "")),
    ("state", lambda r: r["state"]),
    ("task", lambda r: r["task"]),
    ("agent", lambda r: r["agent"]),
    ("model", lambda r: r["model"]),
    ("seed", lambda r: str(r["seed"])),
    ("budget", lambda r: f"{r['budget_s']:.0f}s"),
    ("baseline", lambda r: _fmt(r["baseline_score"])),
    ("best dev", lambda r: _fmt(r["best_dev_score"])),
    ("test", lambda r: "imported: no test" if r.get("imported_from") else _fmt(r["test_score"])),
    ("Δ", lambda r: _fmt(r["improvement"])),
    ("ended", _ended),
)
DROP_ORDER = ("ended", "model", "budget", "seed", "agent", "task", "baseline", "Δ", "best dev", "test")


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

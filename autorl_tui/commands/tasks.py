"""`autorl-tui tasks`: list the task cards found; `autorl-tui tasks validate ID|PATH`: check one."""

from __future__ import annotations

import json
from pathlib import Path

from autorl_tui.exitcodes import ExitCode


def register(subparsers) -> None:
    p = subparsers.add_parser("tasks", help="list tasks, or validate a task card",
                              description="List the task cards on the search path (--tasks-dir, $AUTORL_TASKS_DIR, "
                                          "<home>/tasks, built-in), or check one with `tasks validate ID|PATH`.")
    sub = p.add_subparsers(dest="tasks_command", metavar="SUBCOMMAND")
    ls = sub.add_parser("list", help="list tasks (the default)")
    ls.add_argument("--json", action="store_true", help="one JSON object per task")
    v = sub.add_parser("validate", help="check a task card and print every problem with how to fix it")
    v.add_argument("target", metavar="ID|PATH", help="a task id on the search path, or a folder / task.yaml")
    p.add_argument("--json", action="store_true", help="(list) one JSON object per task")
    p.set_defaults(func=run)


def _search_path(args):
    from autorl_tui.catalog.tasks import task_search_path
    from autorl_tui.home import Home

    home = Home.open(getattr(args, "home", None), create=False)
    return task_search_path([Path(d) for d in (getattr(args, "tasks_dir", None) or [])], home_root=home.root)


def run(args) -> int:
    if getattr(args, "tasks_command", None) == "validate":
        return validate(args)
    return list_tasks(args)


def list_tasks(args) -> int:
    from autorl_tui.catalog.task_checks import data_available
    from autorl_tui.catalog.tasks import list_tasks as find_all

    from autorl_tui.home import Home

    tasks = find_all(_search_path(args), data_home=Home.open(getattr(args, "home", None), create=False).data)
    rows = []
    for task in sorted(tasks.values(), key=lambda t: (t.level, t.id)):
        ok, where = data_available(task)
        rows.append({"id": task.id, "level": task.level, "scorer": task.scorer, "primary_metric": task.primary_metric,
                     "splits": task.splits, "data_available": ok, "data": where, "dir": str(task.dir)})
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return int(ExitCode.OK)
    if not rows:
        print("no tasks found; searched: " + ", ".join(map(str, _search_path(args))))
        return int(ExitCode.OK)
    head = ("ID", "LEVEL", "SCORER", "SPLITS", "DATA")
    table = [(r["id"], str(r["level"]), r["scorer"], ",".join(r["splits"]),
              "yes" if r["data_available"] else f"no: {r['data']}") for r in rows]
    widths = [max(len(x[i]) for x in [head, *table]) for i in range(4)]
    for line in [head, *table]:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths)) + "  " + line[4])
    return int(ExitCode.OK)


def validate(args) -> int:
    from autorl_tui.catalog.task_checks import validate_card
    from autorl_tui.catalog.tasks import find_task

    target = Path(args.target).expanduser()
    if target.exists():
        path = target
    else:
        path = find_task(args.target, _search_path(args)).dir   # UsageError (exit 2) lists the known tasks
    from autorl_tui.home import Home

    # The home's cache: splits materialized here are reused by runs (and by the next validation).
    home = Home.open(args.home)
    report = validate_card(path, cache_root=home.cache / "tasks", data_home=home.data)
    if report.ok:
        sizes = ", ".join(f"{k} {v}" for k, v in report.split_sizes.items())
        print(f"{report.card_path}: valid ({sizes})")
        return int(ExitCode.OK)
    print(f"{report.card_path}: {len(report.problems)} problem(s)")
    for n, problem in enumerate(report.problems, 1):
        print(f"  {n}. {problem}")
    return int(ExitCode.USAGE)

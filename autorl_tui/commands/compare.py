"""`autorl-tui compare RUN_ID... | --plan NAME --html FILE --json FILE`: runs side by side."""

from __future__ import annotations

import sys

from autorl_tui.exitcodes import UsageError


def register(subparsers) -> None:
    p = subparsers.add_parser("compare", help="compare runs (agents × tasks over seeds, gates) as HTML and/or JSON",
                              description="Compare runs given by id, or every run of a plan. Without --html/--json, "
                                          "writes both into the home's reports/ folder.")
    p.add_argument("run_ids", nargs="*", metavar="RUN_ID")
    p.add_argument("--plan", metavar="NAME", action="append",
                   help="compare every run of this plan (again for several plans: their runs side by side)")
    p.add_argument("--primary-task", metavar="TASK", help="the task whose metric must go up for the release gate")
    p.add_argument("--exclude-flagged", action="store_true",
                   help="leave runs with trust flags (docs/trust.md) out of the matrix and the gates; the report "
                        "names them")
    p.add_argument("--html", metavar="FILE", help="write the HTML report here")
    p.add_argument("--json", metavar="FILE", help="write the JSON report here")
    p.set_defaults(func=run)


def run(args) -> int:
    if bool(args.run_ids) == bool(args.plan):
        raise UsageError("compare takes either RUN_ID... or --plan NAME (not both, not neither)")
    from autorl_tui.home import Home
    from autorl_tui.reports.analytics import Analytics
    from autorl_tui.reports.compare_report import build_compare_report, render_compare_html
    from autorl_tui.reports.render import write_outputs

    home = Home.open(args.home, create=False)
    html_path, json_path = args.html, args.json
    if not html_path and not json_path:
        stem = f"compare-{'+'.join(args.plan)}" if args.plan else "compare"
        html_path, json_path = str(home.reports / f"{stem}.html"), str(home.reports / f"{stem}.json")
    with Analytics(home.store_path) as a:
        ids = [a.resolve_run_id(r) for r in args.run_ids] or None
        report = build_compare_report(a, ids=ids, plan=args.plan, primary_task=args.primary_task,
                                      exclude_flagged=args.exclude_flagged)
    html = render_compare_html(report) if html_path else None
    for path in write_outputs(report, html, html_path, json_path):
        print(path, file=sys.stdout)
    return 0

"""`autorl-tui report RUN_ID --html FILE --json FILE`: a run's rollout card."""

from __future__ import annotations

import sys


def register(subparsers) -> None:
    p = subparsers.add_parser("report", help="write a run report (self-contained HTML and/or JSON)",
                              description="Write a run's report: HTML (self-contained, no network) and/or JSON. "
                                          "Without --html/--json, writes both into the home's reports/ folder.")
    p.add_argument("run_id", metavar="RUN_ID", help="a run id, its short form (r0001) or any unique prefix")
    p.add_argument("--html", metavar="FILE", help="write the HTML report here")
    p.add_argument("--json", metavar="FILE", help="write the JSON report here")
    p.set_defaults(func=run)


def run(args) -> int:
    from autorl_tui.home import Home
    from autorl_tui.reports.analytics import Analytics
    from autorl_tui.reports.render import write_outputs
    from autorl_tui.reports.run_report import build_run_report, render_run_html

    home = Home.open(args.home, create=False)
    with Analytics(home.store_path) as a:
        run_id = a.resolve_run_id(args.run_id)
        report = build_run_report(a, run_id)
    html_path, json_path = args.html, args.json
    if not html_path and not json_path:
        html_path = str(home.reports / f"{run_id}.html")
        json_path = str(home.reports / f"{run_id}.json")
    html = render_run_html(report) if html_path else None
    for path in write_outputs(report, html, html_path, json_path):
        print(path, file=sys.stdout)
    return 0

"""`autorl-tui agents`: the agent stacks known here, their output format, and whether each can
run on this machine (executables on PATH, required variables set) — and if not, what to do."""

from __future__ import annotations

import json
from pathlib import Path

from autorl_tui.exitcodes import ExitCode


def register(subparsers) -> None:
    p = subparsers.add_parser("agents", help="list agent stacks and what each is missing",
                              description=__doc__)
    p.add_argument("--json", action="store_true", help="print one JSON object per agent")
    p.add_argument("--ready", action="store_true", help="exit 1 unless every listed agent is ready")
    p.add_argument("names", nargs="*", help="only these agents")
    p.set_defaults(func=run)


def collect(args) -> list[dict]:
    from autorl_tui.catalog.agents import agent_search_path, find_agent
    from autorl_tui.catalog.readiness import agent_readiness, all_agents_readiness
    from autorl_tui.home import resolve_home

    search = agent_search_path([Path(d) for d in args.agents_dir], home_root=resolve_home(args.home))
    if not args.names:
        return all_agents_readiness(search)
    return [dict(agent_readiness(spec), source=str(spec.source), description=spec.description)
            for spec in (find_agent(n, search) for n in args.names)]


def run(args) -> int:
    rows = collect(args)
    if args.json:
        for r in rows:
            print(json.dumps(r))
    else:
        width = max([len(r["name"]) for r in rows] + [5])
        print(f"{'AGENT':<{width}}  {'FORMAT':<19} {'READY':<5}  MISSING / NOTES")
        for r in rows:
            notes = "; ".join(r["problems"]) or ("optional, unset: " + ", ".join(r["unset_env"])
                                                 if r["unset_env"] else "")
            if (r.get("script") or {}).get("unset"):     # an AutoRL-Bench script reads them with no default
                notes = "; ".join(filter(None, [notes, "its start script reads, unset here: "
                                                + ", ".join(r["script"]["unset"])]))
            print(f"{r['name']:<{width}}  {r['output_format']:<19} {'yes' if r['ready'] else 'no':<5}  {notes}")
    if args.ready and not all(r["ready"] for r in rows):
        return int(ExitCode.RUN_FAILED)
    return int(ExitCode.OK)

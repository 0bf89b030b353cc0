"""`autorl-tui cluster status`: the Ray cluster behind `executor: ray` (docs/cluster.md): its
nodes, their GPUs, and which active run of this home holds which node and devices."""

from __future__ import annotations

import json

from autorl_tui.exitcodes import ExitCode, InfraError


def register(subparsers) -> None:
    p = subparsers.add_parser("cluster", help="the Ray cluster that `executor: ray` runs on")
    sub = p.add_subparsers(dest="cluster_cmd", required=True)
    s = sub.add_parser("status", help="nodes, GPUs per node, and which run holds which")
    s.add_argument("--address", help="the head's GCS address HOST:PORT (default: $RAY_ADDRESS)")
    s.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(func=run)


def _holders(home) -> list[dict]:
    """Active Ray attempts of this home with where Ray placed them (ray.json in their log folder)."""
    from autorl_tui.executors.ray import RayExecutor
    from autorl_tui.executors.ray_view import holdings
    from autorl_tui.store.queries import StoreReader

    if not home.store_path.exists():
        return []
    with StoreReader.open(home.store_path) as reader:
        return holdings(reader.live_attempts(RayExecutor.name))


def run(args) -> int:
    import os

    from autorl_tui.executors.ray import cluster_report
    from autorl_tui.home import Home

    address = args.address or os.environ.get("RAY_ADDRESS")
    home = Home.open(args.home, create=False)
    report = cluster_report(address, _holders(home))
    # No cluster to report on is "the harness cannot do this here": ExitCode.INFRA (3), the
    # message on stderr as every InfraError's; with --json the report (connected: false) still prints.
    if args.json:
        print(json.dumps(report, indent=1))
        return 0 if report["connected"] else int(ExitCode.INFRA)
    if not report["connected"]:
        raise InfraError(f"no Ray cluster: {report['detail']}")
    alive = [n for n in report["nodes"] if n["alive"]]
    print(f"Ray cluster at {address}: {len(alive)} alive node(s), "
          f"{sum(n['gpus'] for n in alive):g} GPU(s)")
    for n in report["nodes"]:
        extra = ", ".join(f"{k}={v:g}" for k, v in sorted(n["resources"].items()))
        print(f"  {n['node_id'][:12]}  {n['hostname'] or n['address'] or '-':<20} "
              f"{'alive' if n['alive'] else 'DEAD ':5}  GPUs {n['gpus']:g}  CPUs {n['cpus']:g}"
              + (f"  {extra}" if extra else ""))
        for h in n["runs"]:
            print(f"      {h['run_id']} (attempt {h['attempt']})  GPUs {','.join(h['gpu_ids']) or '-'}")
    for h in report["unplaced_runs"]:
        print(f"  (node gone or not placed yet) {h['run_id']} (attempt {h['attempt']})")
    return 0

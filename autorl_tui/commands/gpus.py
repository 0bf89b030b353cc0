"""`autorl-tui gpus`: the GPU inventory the scheduler will use, and whether containers can run."""

from __future__ import annotations

import json


def register(subparsers) -> None:
    p = subparsers.add_parser("gpus", help="show the GPU inventory (NVML or --gpus) and Docker availability")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from autorl_tui.executors.gpus import inventory, sample_utilization

    inv = inventory(getattr(args, "gpus", None))
    samples = {s.id: s for s in sample_utilization(inv.ids)} if inv.source == "nvml" else {}
    try:
        from autorl_tui.executors.docker import DockerExecutor

        docker_ok, docker_detail = DockerExecutor().available()
    except Exception as exc:  # the docker SDK missing, say
        docker_ok, docker_detail = False, str(exc)
    if args.json:
        data = inv.to_dict()
        data["utilization"] = {k: vars(v) for k, v in samples.items()}
        data["docker"] = {"available": docker_ok, "detail": docker_detail}
        print(json.dumps(data, indent=2))
        return 0
    print(f"GPUs ({inv.source}): {len(inv)}" + (f"  ({inv.note})" if inv.note else ""))
    for g in inv.gpus:
        mem = f"{g.memory_total / 2**30:.0f} GiB" if g.memory_total else "-"
        s = samples.get(g.id)
        use = f"{s.utilization:.0f}% util, {s.memory_used / 2**30:.1f} GiB used" if s and s.memory_used is not None else ""
        print(f"  {g.id:>3}  {g.name or '-':<28} {mem:>8}  {g.uuid or '':<40} {use}")
    if not inv.gpus:
        print("  runs get CPU slots; declare GPUs with --gpus 0,1,... if NVML cannot see them")
    print(f"docker: {'available' if docker_ok else 'not available'}: {docker_detail}")
    return 0

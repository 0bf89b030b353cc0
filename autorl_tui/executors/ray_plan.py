"""Executor ray's plan keys: `cluster:` checked, and what `image:` implies (containers on the nodes)."""

from __future__ import annotations

from autorl_tui.exitcodes import UsageError

CLUSTER_KEYS = {"address", "resources", "cpus", "containers", "auth"}


def check_plan(raw: dict, options: dict, where: str) -> None:
    check_cluster(raw.get("cluster"), where)
    if "image" in raw:
        # An image asks for containers: the docker executor on each run's node (docs/cluster.md).
        options["cluster"] = dict(raw.get("cluster") or {}, containers=True)


def check_cluster(cluster, where: str) -> None:
    """`cluster:` {address: HOST:PORT, resources: {NAME: amount}, cpus: N, containers: true|false
    (the agent in a container on its node; `image:` implies it), auth: token|none (`none` accepts a
    cluster without Ray's token authentication; reports mark it)}."""
    if cluster is None:
        return
    fix = "e.g. cluster: {address: 10.0.0.1:6379, resources: {a100: 1}}"
    if not isinstance(cluster, dict) or set(cluster) - CLUSTER_KEYS:
        raise UsageError(f"plan {where}: `cluster` must be a mapping with keys "
                         f"{', '.join(sorted(CLUSTER_KEYS))}; {fix}")
    if "address" in cluster and not isinstance(cluster["address"], str):
        raise UsageError(f"plan {where}: cluster.address must be a string HOST:PORT; {fix}")
    res = cluster.get("resources", {})
    if not isinstance(res, dict) or not all(isinstance(v, (int, float)) and v > 0 for v in res.values()):
        raise UsageError(f"plan {where}: cluster.resources must map names to positive amounts; {fix}")
    if cluster.get("auth", "token") not in ("token", "none"):
        raise UsageError(f"plan {where}: cluster.auth must be `token` (the default: the cluster must enforce Ray's "
                         f"token authentication) or `none` (an unauthenticated cluster, marked in every report)")
    if "cpus" in cluster and (not isinstance(cluster["cpus"], (int, float)) or cluster["cpus"] < 0):
        raise UsageError(f"plan {where}: cluster.cpus must be a non-negative number; {fix}")
    if not isinstance(cluster.get("containers", False), bool):
        raise UsageError(f"plan {where}: cluster.containers must be true or false (true: each agent runs in a "
                         f"container of its node's Docker Engine); {fix}")

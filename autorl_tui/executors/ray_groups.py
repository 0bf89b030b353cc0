"""Ray placement groups: what a run's attempt and its gradings hold on the cluster, reserved by Ray
itself (docs/cluster.md, "Placement groups"). Runs in the engine's Ray driver process.

A run's attempt reserves one detached placement group, named as its actor (the actor's name is
derived from the home and the attempt, so a restarted engine finds both again): one bundle of the
run's whole request (GPUs, CPUs, memory, custom resources), STRICT_PACK on one node, asked softly
on the node admission packed the run on. The run's actor is scheduled into that bundle; its dev
gradings use the actor's GPUs while it runs, and its held-out test, after the actor has exited, is
seated in the same bundle (`seat`): the same node and GPUs, which nothing else of the cluster could
take meanwhile. The group is removed when the run ends (`release`), a lost attempt's as soon as
it is recorded lost, and a run's other attempts' groups when its next attempt starts. A grading
without a run group (the baselines, graded before the attempt exists; a grading whose node
died) reserves a group of its own for as many GPUs, removed when it ends."""

from __future__ import annotations

import hashlib
from pathlib import Path

STRATEGY = "STRICT_PACK"      # the agent's GPUs and its gradings' on one node


def run_prefix(home: Path, run_id: str) -> str:
    """The common start of the names of a run's attempts' actors and groups (ray.actor_name)."""
    digest = hashlib.sha256(str(Path(home).resolve()).encode()).hexdigest()[:12]
    return f"autorl-{digest}-{run_id}-a"


def bundles(needs: dict[str, float]) -> list[dict[str, float]]:
    """The group of a run's attempt: one bundle of its whole request (Ray refuses zero entries)."""
    return [{k: float(v) for k, v in needs.items() if v}]


def reserve(ray, bundle_list: list[dict[str, float]], *, name: str = "", node: str | None = None,
            detached: bool = False):
    """Ask Ray for a group (asynchronous: `group.ready()` says when it is placed). `node`: the
    node admission packed it on, a soft target (elsewhere when Ray sees that node full)."""
    from ray.util.placement_group import placement_group

    return placement_group(bundle_list, strategy=STRATEGY, name=name, lifetime="detached" if detached else None,
                           _soft_target_node_id=node)


def find(ray, name: str):
    """The live group of that name in the driver's namespace, or None."""
    from ray.util.placement_group import get_placement_group, placement_group_table

    live = [g for g in placement_group_table().values() if g.get("name") == name and g.get("state") != "REMOVED"]
    if not live:
        return None
    try:
        return get_placement_group(name)
    except ValueError:       # removed meanwhile
        return None


def release(ray, prefix: str, keep: str | None = None) -> list[str]:
    """Remove every live group whose name starts with `prefix` (a run's: `run_prefix`), but
    `keep`; their names. Removing a group ends the actors in it (a killed attempt's, say)."""
    from ray.util.placement_group import get_placement_group, remove_placement_group, placement_group_table

    names = sorted({g["name"] for g in placement_group_table().values()
                    if (g.get("name") or "").startswith(prefix) and g.get("name") != keep
                    and g.get("state") != "REMOVED"})
    removed = []
    for name in names:
        try:
            remove_placement_group(get_placement_group(name))
        except ValueError:       # gone meanwhile
            continue
        removed.append(name)
    return removed


def remove(ray, group) -> None:
    from ray.util.placement_group import remove_placement_group

    try:
        remove_placement_group(group)
    except Exception:        # already gone (its creator's job ended, the head restarted)
        pass


def _seated() -> dict:
    import ray

    return {"node_id": ray.get_runtime_context().get_node_id(), "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}


def seat(ray, group, gpus: int):
    """A reference to where the group's bundle is and which GPUs it holds: a task seated in the
    bundle asking its GPUs (it waits while the run's actor still holds them)."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    strategy = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=0)
    return ray.remote(_seated).options(num_gpus=gpus, num_cpus=0, max_retries=0,
                                       scheduling_strategy=strategy).remote()


def in_bundle(group):
    """The scheduling strategy of the run's actor: the group's one bundle."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    return PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=0)

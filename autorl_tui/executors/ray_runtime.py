"""What the engine ships to the Ray nodes with `runtime_env`, and the check that a node runs the
engine's code (docs/cluster.md, "What Ray ships to a node").

The engine's driver joins the cluster with a job `runtime_env` of environment variables, which
Ray sets in every worker of the job on every node (the run's actor, its shim, the node's grading
actor, the pinned checks): the engine's settings that the node's side reads (its gradings'
memory limit, warm grader, LLM judge; the agent runtime's path), so a node grades as the engine
is configured rather than as its raylet's environment happened to be when `ray start` ran; and
the identity of the engine's code (`code_identity`: its version and a digest of its modules),
which a node compares with its own. The code itself, the agent runtime and the agent stacks are
not shipped (`py_modules`/`working_dir` would put the package in Ray's per-node cache, under a
path the sandboxes do not bind, and not its dependencies nor the multi-GB agent runtime): every
node must already have them at the same paths (an image; docs/cluster.md)."""

from __future__ import annotations

import functools
import hashlib
import os
import socket
from pathlib import Path

from autorl_tui import __version__, settings

CODE_VAR = "AUTORL_ENGINE_CODE"        # a channel from the engine to its nodes (settings.INTERNAL)
# The settings the node's side reads (its gradings, the run's shim): the engine's, shipped.
NODE_SETTINGS = ("agent_runtime", "judge_url", "judge_cache", "grader_memory", "warm_grader", "grader_cuda_warmup")


@functools.lru_cache(maxsize=1)
def code_identity() -> str:
    """`VERSION+DIGEST`: the package's version and a digest of its modules (path within the
    package and contents), the same wherever the package is installed."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return f"{__version__}+{digest.hexdigest()[:12]}"


def runtime_env() -> dict:
    """The job runtime_env of the engine's driver (`ray.init(runtime_env=...)`)."""
    return {"env_vars": {**settings.exported(NODE_SETTINGS), CODE_VAR: code_identity()}}


def mismatch(shipped: str | None, own: str) -> str | None:
    """Why a node's code is not the engine's, or None."""
    if shipped is None:
        return "the engine's code identity did not reach it (runtime_env)"
    if shipped != own:
        return f"it runs autorl-tui {own}, the engine {shipped}"
    return None


def node_software() -> dict:
    """A task pinned to one node: its code identity against the one shipped, and the settings it got."""
    import ray

    own = code_identity()
    why = mismatch(os.environ.get(CODE_VAR), own)
    return {"node_id": ray.get_runtime_context().get_node_id(), "hostname": socket.gethostname(),
            "ok": why is None, "why": why or "", "code": own, "settings": settings.exported(NODE_SETTINGS)}


def refused_nodes(results: list[dict]) -> str:
    """The nodes a pinned check refused, each with why (`host (node id): why; ...`); "" for none
    (this check's and ray_node's NVML check's)."""
    return "; ".join(f"{r['hostname']} ({r['node_id'][:12]}): {r['why']}" for r in results if not r["ok"])


def software_verdict(results: list[dict]) -> str | None:
    """The refusal for nodes that do not run the engine's code (one line, with the fix), or None."""
    names = refused_nodes(results)
    if not names:
        return None
    return (f"Ray node(s) do not run the engine's autorl-tui ({code_identity()}): {names}. Install the same "
            f"autorl-tui on every node, at the same path (the same image or checkout; docs/cluster.md)")

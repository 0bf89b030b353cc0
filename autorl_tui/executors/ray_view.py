"""What the engine knows of the Ray cluster without waiting on Ray: the nodes as last fetched in
the background (`ClusterView`), and which attempt of this home holds which node and GPU ids
(`holdings`, from the `ray.json` each attempt's actor wrote). The console's GPUs screen (through
the engine's snapshot and `ClusterChanged` events) and `autorl-tui cluster status` show the same
`cluster_state`."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

VIEW_REFRESH_S = 2.0          # how often the engine's view of the cluster's nodes is refreshed


class ClusterView:
    """The cluster's nodes (`ray.nodes()`, dead ones included) as last fetched by a background
    thread every VIEW_REFRESH_S: admission and the console read it without waiting on Ray."""

    def __init__(self, fetch):
        self._fetch = fetch
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._at = float("-inf")
        self.nodes: list[dict] | None = None      # None until the first fetch succeeded
        self.error: str | None = None             # why the last fetch failed (the nodes are then the last known)
        self.fetched_at: float | None = None      # wall clock of the last successful fetch

    def current(self) -> list[dict] | None:
        self.kick()
        return self.nodes

    def kick(self, force: bool = False) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            if not force and time.monotonic() - self._at < VIEW_REFRESH_S:
                return
            self._thread = threading.Thread(target=self._refresh, name="ray-cluster-view", daemon=True)
            self._thread.start()

    def _refresh(self) -> None:
        try:
            self.nodes, self.error, self.fetched_at = list(self._fetch()), None, time.time()
        except Exception as exc:
            self.error = str(exc) or type(exc).__name__
        finally:
            self._at = time.monotonic()

    def alive(self) -> dict[str, dict] | None:
        nodes = self.current()
        return None if nodes is None else {n["NodeID"]: n for n in nodes if n.get("Alive")}


def node_summary(nodes: list[dict]) -> list[dict]:
    """`ray.nodes()` rows as shown: id, address, alive, GPUs, CPUs, custom resources."""
    out = []
    for n in nodes:
        res = {k: float(v) for k, v in n.get("Resources", {}).items() if not k.startswith("node:")}
        out.append({"node_id": n["NodeID"], "alive": bool(n.get("Alive")), "address": n.get("NodeManagerAddress"),
                    "hostname": n.get("NodeManagerHostname"), "gpus": res.get("GPU", 0.0), "cpus": res.get("CPU", 0.0),
                    "resources": {k: v for k, v in res.items()
                                  if k not in ("GPU", "CPU", "memory", "object_store_memory")}})
    return out


_where_cache: dict[str, dict] = {}      # log folder -> its ray.json (written once, when the actor started)


def holdings(attempts: list[tuple[str, int, str]]) -> list[dict]:
    """Live Ray attempts (run id, attempt number, log folder) with where Ray placed them."""
    out = []
    for run_id, number, log_dir in attempts:
        where = _where_cache.get(log_dir)
        if where is None:
            try:
                where = json.loads((Path(log_dir) / "ray.json").read_text())
            except (OSError, ValueError, TypeError):
                where = {}        # not placed yet: read again next time
            else:
                _where_cache[log_dir] = where
        out.append({"run_id": run_id, "attempt": int(number), "node_id": where.get("node_id"),
                    "gpu_ids": [str(g) for g in where.get("gpu_ids", [])]})
    return sorted(out, key=lambda h: (h["run_id"], h["attempt"]))


def cluster_state(address: str | None, nodes: list[dict] | None, error: str | None, held: list[dict]) -> dict:
    """The cluster as the console and `cluster status` show it: each node with the runs placed on
    it; runs whose node is unknown (gone, or not placed yet) under `unplaced_runs`."""
    summary = node_summary(nodes or [])
    known = {n["node_id"] for n in summary}
    for node in summary:
        node["runs"] = [h for h in held if h["node_id"] == node["node_id"]]
    return {"connected": nodes is not None, "address": address, "detail": error or ("ok" if nodes is not None else
                                                                                     "connecting"),
            "nodes": summary, "unplaced_runs": [h for h in held if h["node_id"] not in known]}

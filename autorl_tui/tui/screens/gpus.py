"""GPUs: each device, the run holding it, utilization and memory; or the CPU slots. Below, when
the engine uses a Ray cluster (executor ray): its nodes, their GPUs, and which attempt holds each."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import DataTable, Static

from autorl_tui.tui.widgets.footer import console_footer
from autorl_tui.tui.actions import bindings
from autorl_tui.tui.formatting import ACTIVE_STATES, fmt_elapsed_budget, short_id
from autorl_tui.catalog.plans import DEFAULT_EXECUTOR, host_slot_executors
from autorl_tui.units import fmt_bytes
from autorl_tui.tui.model import Changes


class GpusScreen(Screen):
    SCOPE = "gpus"
    BINDINGS = bindings("gpus")

    def compose(self) -> ComposeResult:
        yield Static(id="gpus-title", classes="status-bar")
        yield DataTable(id="gpus-table", cursor_type="row")
        yield Static(id="cluster-title", classes="status-bar")
        yield DataTable(id="cluster-table", cursor_type="row")
        yield console_footer()

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        model = self.app.model
        devices = [str(d) for d in model.gpus.get("devices") or []]
        holders = model.gpus.get("holders") or {}
        table = self.query_one("#gpus-table", DataTable)
        table.clear(columns=True)
        title = self.query_one("#gpus-title", Static)
        now = self.app.clock()
        if devices:
            title.update(f"{len(devices)} GPU(s)")
            for key, label in (("dev", "GPU"), ("run", "Held by"), ("task", "Task/agent"), ("util", "Util"),
                               ("mem", "Memory")):
                table.add_column(label, key=key)
            for dev in devices:
                rid = holders.get(dev)
                run = model.runs.get(rid) if rid else None
                stats = model.gpu_stats.get(dev, {})
                util = f"{stats['util']:.0f}%" if stats.get("util") is not None else "-"
                mem = (f"{fmt_bytes(stats.get('mem_used'))}/{fmt_bytes(stats.get('mem_total'))}"
                       if stats.get("mem_total") else "-")
                table.add_row(dev, short_id(rid) if rid else "free",
                              f"{run['task']}/{run['agent']}" if run else "", util, mem, key=dev)
        else:
            slots = model.gpus.get("cpu_slots")
            title.update(f"no GPUs: CPU slots ({slots if slots else 'engine default'} concurrent runs)")
            for key, label in (("slot", "Slot"), ("run", "Run"), ("task", "Task/agent"), ("state", "State"),
                               ("time", "Elapsed/Budget")):
                table.add_column(label, key=key)
            # A cluster executor's runs hold the cluster's resources (below), not this host's slots.
            on_host = host_slot_executors()
            active = [r for r in model.runs.values()
                      if r["state"] in ACTIVE_STATES and (r.get("executor") or DEFAULT_EXECUTOR) in on_host]
            active.sort(key=lambda r: r["id"])
            for i, run in enumerate(active, 1):
                table.add_row(f"cpu{i}", short_id(run["id"]), f"{run['task']}/{run['agent']}", run["state"],
                              fmt_elapsed_budget(run, now), key=run["id"])
            if not active:
                table.add_row("-", "free", "", "", "")
        self.show_cluster(model.gpus.get("cluster"), now)

    def show_cluster(self, cluster: dict | None, now: float) -> None:
        title = self.query_one("#cluster-title", Static)
        table = self.query_one("#cluster-table", DataTable)
        title.display = table.display = cluster is not None
        if cluster is None:
            return
        table.clear(columns=True)
        where = cluster.get("address") or "?"
        nodes = cluster.get("nodes") or []
        if not cluster.get("connected"):
            title.update(f"Ray cluster {where}: {cluster.get('detail') or 'not connected'}")
        else:
            alive = [n for n in nodes if n["alive"]]
            dead = len(nodes) - len(alive)
            held = sum(len(n["runs"]) for n in nodes) + len(cluster.get("unplaced_runs") or [])
            title.update(f"Ray cluster {where}: {len(alive)} node(s) alive" + (f", {dead} dead" if dead else "")
                         + f", {sum(n['gpus'] for n in alive):g} GPU(s), {held} attempt(s) placed")
        for key, label in (("node", "Node"), ("addr", "Address"), ("state", "State"), ("gpu", "GPU"),
                           ("run", "Held by"), ("task", "Task/agent"), ("time", "Elapsed/Budget")):
            table.add_column(label, key=key)
        for node in sorted(nodes, key=lambda n: (not n["alive"], n.get("address") or "", n["node_id"])):
            by_gpu = {g: h for h in node["runs"] for g in h["gpu_ids"]}
            rows = [(str(g), by_gpu.get(str(g))) for g in range(int(node["gpus"]))]
            rows += [("-", h) for h in node["runs"] if not h["gpu_ids"]]       # CPU-only runs on the node
            empty = "free" if node["alive"] else "gone"
            first = True
            for gpu, holding in rows or [("-", None)]:
                label = (node["node_id"][:12], f"{node.get('hostname') or ''} {node.get('address') or ''}".strip(),
                         "alive" if node["alive"] else "DEAD") if first else ("", "", "")
                table.add_row(*label, gpu, *self._holder_cells(holding, empty if rows else "no GPUs", now),
                              key=f"{node['node_id']}/{gpu}/{holding['run_id'] if holding else ''}")
                first = False
        for holding in cluster.get("unplaced_runs") or []:
            table.add_row("?", "node gone or not placed yet", "", ",".join(holding["gpu_ids"]) or "-",
                          *self._holder_cells(holding, "", now), key=f"unplaced/{holding['run_id']}")

    def _holder_cells(self, holding: dict | None, empty: str, now: float) -> tuple[str, str, str]:
        if holding is None:
            return empty, "", ""
        run = self.app.model.runs.get(holding["run_id"])
        return (f"{short_id(holding['run_id'])} a{holding['attempt']}",
                f"{run['task']}/{run['agent']}" if run else "", fmt_elapsed_budget(run, now) if run else "")

    def apply_changes(self, changes: Changes) -> None:
        if changes.runs or changes.resources or changes.cluster:
            self.reload()

    def tick(self) -> None:
        self.reload()

    def action_back(self) -> None:
        self.app.pop_screen()

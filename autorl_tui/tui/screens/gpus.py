"""GPUs: each device, the run holding it, utilization and memory; or the CPU slots."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from autorl_tui.tui.actions import bindings
from autorl_tui.tui.formatting import ACTIVE_STATES, fmt_elapsed_budget, short_id
from autorl_tui.units import fmt_bytes
from autorl_tui.tui.model import Changes


class GpusScreen(Screen):
    SCOPE = "gpus"
    BINDINGS = bindings("gpus")

    def compose(self) -> ComposeResult:
        yield Static(id="gpus-title", classes="status-bar")
        yield DataTable(id="gpus-table", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        self.reload()

    def reload(self) -> None:
        model = self.app.model
        devices = [str(d) for d in model.gpus.get("devices") or []]
        holders = model.gpus.get("holders") or {}
        table = self.query_one(DataTable)
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
            active = [r for r in model.runs.values() if r["state"] in ACTIVE_STATES]
            active.sort(key=lambda r: r["id"])
            for i, run in enumerate(active, 1):
                table.add_row(f"cpu{i}", short_id(run["id"]), f"{run['task']}/{run['agent']}", run["state"],
                              fmt_elapsed_budget(run, now), key=run["id"])
            if not active:
                table.add_row("-", "free", "", "", "")

    def apply_changes(self, changes: Changes) -> None:
        if changes.runs or changes.resources:
            self.reload()

    def tick(self) -> None:
        self.reload()

    def action_back(self) -> None:
        self.app.pop_screen()

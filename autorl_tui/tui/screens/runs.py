"""Runs: queue and history in one table, filtered and sorted; only changed cells are redrawn."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from autorl_tui.tui.widgets.footer import console_footer
from autorl_tui.tui.actions import bindings
from autorl_tui.tui.formatting import (ACTIVE_STATES, FINISHED_STATES, STATE_ICON, STATE_STYLE, dev_baseline,
                                       fmt_delta, fmt_elapsed_budget, fmt_liveness, fmt_score, is_stale, short_id,
                                       shown_improvement)
from autorl_tui.tui.model import Changes
from autorl_tui.tui.typed_bar import route_key
from autorl_tui.tui.widgets.chart import sparkline
from autorl_tui.tui.widgets.text_line import set_text

COLUMNS = [("state", "State", 12), ("id", "Run", 6), ("task", "Task", 12), ("agent", "Agent", 14),
           ("model", "Model", 8), ("seed", "Seed", 4), ("gpu", "GPU", 5), ("time", "Elapsed/Budget", 14),
           ("activity", "Last event", 24),
           ("baseline", "Base dev", 8), ("best", "Best dev", 8), ("trend", "Trend", 6), ("base_test", "Base test", 9), ("test", "Test", 6),
           ("improvement", "Δ", 10)]
# Which columns go first when the terminal is narrow: state and id never; the agent last (the
# reference and the control of one task would look alike without it), then the task. The dev
# trend (a sparkline of the last graded dev scores) stays down to 80 columns.
DROP_ORDER = ("model", "seed", "gpu", "activity", "base_test", "time", "baseline", "improvement", "trend", "task",
              "agent")
TREND_WIDTH = 6
SCROLLBAR = 2          # the table's vertical scrollbar, there as soon as the rows outgrow the screen


def visible_columns(width: int) -> list[tuple]:
    """COLUMNS that fit in `width` cells beside the table's vertical scrollbar (each column takes
    its width plus 2 of padding; the last column's right padding may fall off the edge): a table
    wider than that would grow a horizontal scrollbar."""
    shown = list(COLUMNS)
    for key in DROP_ORDER:
        if sum(w + 2 for _, _, w in shown) - 1 + SCROLLBAR <= width:
            break
        shown = [c for c in shown if c[0] != key]
    return shown


SORTS = [("default", None), ("state", "state"), ("task", "task"), ("agent", "agent"),
         ("improvement", "improvement"), ("dev improvement", "dev_improvement"),
         ("best dev", "best_dev_score"), ("created", "created_at")]


def default_order(run: dict):
    """Active first, then the queue in scheduling order, then history newest first."""
    state = run["state"]
    if state in ACTIVE_STATES:
        return (0, -(run.get("started_at") or 0), run["id"])
    if state == "queued":
        return (1, -(run.get("priority") or 0), run.get("queue_pos") or 0, run["id"])
    return (2, -(run.get("ended_at") or run.get("created_at") or 0), run["id"])


def matches(run: dict, query: str) -> bool:
    """Space-separated terms, all must match; `field:value` matches one field (state:failed)."""
    for term in query.lower().split():
        if ":" in term:
            key, _, value = term.partition(":")
            if value not in str(run.get(key, "")).lower():
                return False
        elif not any(term in str(run.get(k, "")).lower() for k in ("id", "task", "agent", "model", "state", "plan_name")):
            return False
    return True


class RunsScreen(Screen):
    SCOPE = "runs"
    BINDINGS = bindings("runs")
    # Rows the table holds: active runs and the queue come first, then history newest first; a
    # home of 10,000 runs shows its first 500 (building a row costs the table ~1 ms) and `/`
    # finds any other.
    MAX_ROWS = 500

    def __init__(self):
        super().__init__()
        self.filter_text = ""
        self.sort_index = 0
        self.sort_reverse = False
        self._cells: dict[str, tuple] = {}     # run id -> the cell values on screen
        self._order: list[str] = []
        self.matching = 0          # runs that match the filter (the table holds at most MAX_ROWS)

    def compose(self) -> ComposeResult:
        yield Static(id="status", classes="status-bar")
        yield Input(placeholder="filter: words or field:value (state:running agent:scripted), esc to close",
                    id="filter", select_on_focus=False)   # keys typed before the focus arrives stay
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield Static(id="runs-hint", classes="hint")
        yield console_footer()

    def on_mount(self) -> None:
        self._columns: list[tuple] = []
        self.fit_columns(self.app.size.width)
        self.query_one("#filter").display = False
        self.reload()
        self.query_one(DataTable).focus()

    def fit_columns(self, width: int) -> bool:
        """Show the columns that fit (scores stay longest); True when the set changed."""
        columns = visible_columns(width)
        if columns == self._columns:
            return False
        table = self.query_one(DataTable)
        table.clear(columns=True)
        for key, label, w in columns:
            table.add_column(label, key=key, width=w)
        self._columns = columns
        self._cells.clear()
        return True

    def on_resize(self, event) -> None:
        if self.fit_columns(event.size.width):
            self.reload()

    def _shown(self, cells: tuple) -> tuple:
        keys = {key for key, _, _ in self._columns}
        return tuple(c for (key, _, _), c in zip(COLUMNS, cells) if key in keys)

    # ------------------------------------------------------------------ data
    def row_cells(self, run: dict) -> tuple:
        now = self.app.clock()
        state = run["state"]
        label = f"{STATE_ICON.get(state, ' ')} {state}"
        style = STATE_STYLE.get(state, "")
        if is_stale(run, now):       # silent too long: the icon says so even when columns are cut
            label, style = f"⚠ {state}", "bold yellow"
        holders = [d for d, rid in (self.app.model.gpus.get("holders") or {}).items() if rid == run["id"]]
        gpu = ",".join(holders) if holders else (str(run.get("gpus_requested")) if run.get("gpus_requested") else "cpu")
        imp, basis = shown_improvement(run)
        return (Text(label, style=style), short_id(run["id"]), run.get("task", ""),
                run.get("agent", ""), run.get("model", ""), str(run.get("seed", "")), gpu,
                fmt_elapsed_budget(run, now),
                Text(fmt_liveness(run, now), style=style if is_stale(run, now) or state == "failed" else "dim"),
                fmt_score(dev_baseline(run)),
                fmt_score(run.get("best_dev_score")),
                Text(sparkline([v for _, v in run.get("dev_scores") or ()], TREND_WIDTH), style="green"),
                fmt_score(run.get("baseline_score")),
                fmt_score(run.get("test_score")),
                Text(fmt_delta(imp) + (" dev" if basis == "dev" and imp is not None else ""),
                     style="green" if imp and imp > 0 else "red" if imp and imp < 0 else ""))

    def ordered_ids(self) -> list[str]:
        """The ids the table shows, in order: the first MAX_ROWS of the runs that match the filter
        (`self.matching` says how many match)."""
        runs = [r for r in self.app.model.runs.values() if matches(r, self.filter_text)]
        self.matching = len(runs)
        _, field = SORTS[self.sort_index]
        if field is None:
            runs.sort(key=default_order, reverse=self.sort_reverse)
        else:
            def key(r):
                v = r.get(field)
                return (v is None, v if v is not None else 0, r["id"])
            runs.sort(key=key, reverse=self.sort_reverse)
        return [r["id"] for r in runs[:self.MAX_ROWS]]

    def reload(self) -> None:
        """Rebuild the table (snapshot, filter or sort changed)."""
        table = self.query_one(DataTable)
        selected = self.selected_run_id()
        table.clear()
        self._cells.clear()
        self._order = self.ordered_ids()
        for rid in self._order:
            cells = self.row_cells(self.app.model.runs[rid])
            self._cells[rid] = cells
            table.add_row(*self._shown(cells), key=rid)
        if selected in self._order:
            table.move_cursor(row=self._order.index(selected), animate=False)
        self.refresh_status()

    def update_rows(self, run_ids) -> None:
        """Touch only the cells that changed; re-sort only if the order changed."""
        table = self.query_one(DataTable)
        order = self.ordered_ids()
        if set(order) != set(self._order):
            self.reload()
            return
        for rid in run_ids:
            if rid not in self._cells:
                continue
            new = self.row_cells(self.app.model.runs[rid])
            old = self._cells[rid]
            keys = {key for key, _, _ in self._columns}
            for (key, _, _), a, b in zip(COLUMNS, old, new):
                if key in keys and (str(a) != str(b) or (isinstance(a, Text) and a.style != b.style)):
                    table.update_cell(rid, key, b)
            self._cells[rid] = new
        if order != self._order:
            selected = self.selected_run_id()
            # sort(key=...) gets a row's cell values: the short id (column 1) maps back to the run.
            position = {short_id(rid): i for i, rid in enumerate(order)}
            table.sort(key=lambda row: position.get(str(row[1]), len(position)))
            self._order = order
            if selected in order:
                table.move_cursor(row=order.index(selected), animate=False)

    def apply_changes(self, changes: Changes) -> None:
        if changes.runs or changes.queue:
            self.update_rows(changes.runs)
        self.refresh_status()

    def tick(self) -> None:
        active = [rid for rid, r in self.app.model.runs.items() if r["state"] in ACTIVE_STATES]
        if active:
            self.update_rows(active)
        self.refresh_status()      # ages and whether an engine holds the home move with the clock

    def refresh_status(self) -> None:
        if not self.is_mounted:
            return
        set_text(self.query_one("#status", Static), self.app.status_line(), fixed_height=True)
        sort_name = SORTS[self.sort_index][0] + (" ↓" if self.sort_reverse else "")
        shown = len(self._order)
        total = len(self.app.model.runs)
        hint = f"{shown} of {total} runs  sort: {sort_name}"
        if self.matching > shown:
            hint = (f"the first {shown} of {self.matching} {'matching ' if self.filter_text else ''}runs "
                    f"({total} in all; / filters)  sort: {sort_name}")
        if self.filter_text:
            hint += f"  filter: {self.filter_text}"
        if not total:
            hint = "no runs yet: press n to start a plan"
        set_text(self.query_one("#runs-hint", Static), hint, fixed_height=True)

    def selected_run_id(self) -> str | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        try:
            return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        except Exception:
            return None

    def _selected(self) -> dict | None:
        rid = self.selected_run_id()
        if rid is None:
            self.notify("no run selected", severity="warning")
            return None
        return self.app.model.runs.get(rid)

    # ------------------------------------------------------------------ actions
    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.app.open_run(event.row_key.value)

    def action_open_run(self) -> None:
        run = self._selected()
        if run:
            self.app.open_run(run["id"])

    def action_cancel_run(self) -> None:
        run = self._selected()
        if not run:
            return
        if run["state"] in FINISHED_STATES:
            self.notify(f"{short_id(run['id'])} is already {run['state']}", severity="warning")
            return
        from autorl_tui.tui.screens.prompts import ConfirmScreen

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.app.engine_command(lambda c: c.cancel(run["id"]), f"cancelling {short_id(run['id'])}")
        self.app.push_screen(ConfirmScreen(f"Cancel run {run['id']} ({run['state']})?"), confirmed)

    def action_retry_run(self) -> None:
        run = self._selected()
        if not run:
            return
        from autorl_tui.tui.screens.prompts import ConfirmScreen

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.app.engine_command(lambda c: c.retry(run["id"]), "queued again as {result}")
        self.app.push_screen(ConfirmScreen(f"Retry run {run['id']} ({run['state']}) as a new run?"), confirmed)

    def action_move_to_front(self) -> None:
        run = self._selected()
        if run:
            self.app.engine_command(lambda c: c.move_to_front(run["id"]), f"{short_id(run['id'])} moved to the front")

    def _bump(self, delta: int) -> None:
        run = self._selected()
        if run:
            p = int(run.get("priority") or 0) + delta
            self.app.engine_command(lambda c: c.set_priority(run["id"], p), f"{short_id(run['id'])} priority {p}")

    def action_priority_up(self) -> None:
        self._bump(1)

    def action_priority_down(self) -> None:
        self._bump(-1)

    def action_export_report(self) -> None:
        run = self._selected()
        if run:
            self.app.export_report(run["id"])

    def action_sort_next(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self.reload()

    def action_sort_reverse(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self.reload()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()
        box.cursor_position = len(box.value)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.filter_text = event.value.strip()
            self.reload()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            # Enter closes the bar and keeps the filter (the hint names it; / edits it): keys
            # are commands again only once the bar is visibly closed.
            event.input.display = False
            self.query_one(DataTable).focus()

    def _close_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.display = False
        self.query_one(DataTable).focus()

    def on_key(self, event) -> None:
        route_key(event, self.query_one("#filter", Input), self.action_filter, self._close_filter)

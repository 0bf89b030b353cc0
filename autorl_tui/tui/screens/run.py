"""Run: one run live — agent action log, metric charts, submissions, revisions with diffs,
resource and budget gauges — and the actions that steer it."""

from __future__ import annotations

import asyncio
from collections import deque

from rich.syntax import Syntax
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import (DataTable, Input, SelectionList, Static, TabbedContent, TabPane)

from autorl_tui.durations import format_duration, parse_duration
from autorl_tui.exitcodes import UsageError
from autorl_tui.scores import env_summary_text
from autorl_tui.reports.series_order import informative_rank, is_constant
from autorl_tui.tui.widgets.footer import console_footer
from autorl_tui.tui.actions import bindings
from autorl_tui.tui.formatting import (ACTIVE_STATES, FINISHED_STATES, STATE_STYLE, agent_span, budget_s,
                                       fmt_after_agent, fmt_delta, fmt_offset, fmt_score, time_left)
from autorl_tui.tui.model import Changes
from autorl_tui.tui.typed_bar import route_key
from autorl_tui.tui.widgets.chart import MetricChart, sparkline
from autorl_tui.tui.widgets.checklist import CheckList
from autorl_tui.tui.widgets.gauge import Gauge
from autorl_tui.units import fmt_bytes
from autorl_tui.tui.widgets.log_view import LogLine, LogView
from autorl_tui.tui.widgets.text_line import set_text

DEFAULT_SERIES = ("reward", "loss", "kl", "entropy", "completions/mean_length", "dev score", "dev_score")
SERIES_COLORS = ("green", "cyan", "yellow", "magenta", "blue", "bright_red")
MAX_POINTS = 5000
LOG_CAPACITY = 20_000


class RunScreen(Screen):
    SCOPE = "run"
    BINDINGS = bindings("run")

    def __init__(self, run_id: str):
        super().__init__()
        self.run_id = run_id
        self.loaded = False
        self.log_scale = False    # the Metrics tab's y axis (l toggles)
        self.as_of_seq = 0
        self._early: list[Changes] = []
        self.series: dict[str, deque] = {}
        self.series_source: dict[str, str] = {}
        self._sessions: dict[int, int] = {}        # training session id -> its number in this run
        self._base_name: dict[str, str] = {}       # "loss [s2]" -> "loss"
        self._series_x: dict[str, int] = {}
        self.selected_series: list[str] = []
        self.submissions: dict[int, dict] = {}
        self.revisions: list[dict] = []
        self._revisions_dirty = False
        self._charts_dirty: set[str] = set()

    @property
    def run(self) -> dict:
        return self.app.model.runs.get(self.run_id) or {"id": self.run_id, "state": "?"}

    def compose(self) -> ComposeResult:
        yield Static(id="run-header", classes="status-bar")
        with Horizontal(id="gauges"):
            with Vertical(classes="gauge-col"):
                yield Gauge("Budget", id="g-budget")
                yield Gauge("CPU", id="g-cpu")
            with Vertical(classes="gauge-col", id="gauge-col-2"):
                yield Gauge("RSS", id="g-rss")
                yield Gauge("GPU", id="g-gpu")
        with TabbedContent(id="tabs", initial="log"):
            with TabPane("Log", id="log"):
                yield Input(placeholder="search the log (enter: find, n/N: next/previous, esc: close)",
                            id="search", select_on_focus=False)
                yield LogView(capacity=LOG_CAPACITY, id="log-view")
                yield Static(id="log-status", classes="hint")
            with TabPane("Metrics", id="metrics"):
                with Horizontal():
                    yield CheckList(id="series-list")   # ✓ or blank, not a coloured X
                    yield VerticalScroll(id="charts")
            with TabPane("Submissions", id="submissions"):
                yield DataTable(id="subs-table", cursor_type="row", zebra_stripes=True)
            with TabPane("Revisions", id="revisions"):
                with Horizontal():
                    yield DataTable(id="rev-table", cursor_type="row")
                    with VerticalScroll(id="diff-scroll"):
                        yield Static("select a revision to see its diff", id="diff")
        yield console_footer()

    def on_mount(self) -> None:
        self.query_one("#search").display = False
        subs = self.query_one("#subs-table", DataTable)
        for key, label in (("seq", "#"), ("status", "Status"), ("score", "Dev score"), ("imp", "Δ baseline"),
                           ("hash", "Hash"), ("rev", "Revision"), ("received", "Received"), ("graded", "Graded"),
                           ("note", "Note")):
            subs.add_column(label, key=key)
        revs = self.query_one("#rev-table", DataTable)
        for key, label in (("seq", "#"), ("time", "Time"), ("reason", "Reason"), ("files", "Files"),
                           ("bytes", "Size")):
            revs.add_column(label, key=key)
        self.query_one(LogView).focus()
        self.refresh_header()
        self.load_history()

    # ------------------------------------------------------------------ history, then live
    @work(exclusive=True, group="history")
    async def load_history(self) -> None:
        client = self.app.client
        if client is None:
            return
        try:
            hist = await client.run_history(self.run_id)
        except Exception as exc:   # noqa: BLE001 - shown to the operator
            self.notify(f"could not load {self.run_id}: {exc}", severity="error")
            return
        self.as_of_seq = hist["as_of_seq"]
        if hist.get("run"):
            self.app.model.runs.setdefault(self.run_id, hist["run"])
        log = self.query_one(LogView)
        log.clear()
        log.set_origin(self._origin())
        log.append_lines([LogLine(e["ts"], e["kind"], e["level"], e["message"]) for e in hist["events"]])
        for m in hist["metrics"]:
            self._add_point(m["name"], m["step"], m["value"], m["source"], m.get("session_id"))
        for sub in hist["submissions"]:
            self._put_submission(sub)
        self.revisions = hist["revisions"]
        self._fill_revisions()
        if hist.get("resources"):
            r = hist["resources"]
            self._show_resources(r.get("cpu_percent"), r.get("rss_bytes"), r.get("n_procs"), r.get("gpus"),
                                 r.get("load1"))
        self.loaded = True
        for early in self._early:
            self._apply(early, min_seq=self.as_of_seq)
        self._early.clear()
        self._sync_series_list()
        self._redraw_charts()
        self._update_log_status(hist.get("events_total", 0))
        self.refresh_header()     # the run's row may have arrived with the history: not only on the next tick

    def _origin(self) -> float | None:
        """Log, submission and revision times are offsets from the agent's start, the clock the
        budget gauge counts on; queueing and preparation come before it (negative offsets, and
        the line under the log says how long). Before the agent starts: from the run's creation."""
        return self.run.get("started_at") or self.run.get("created_at")

    def _clock_note(self) -> str:
        run = self.run
        if run.get("started_at") and run.get("created_at"):
            before = format_duration(max(0.0, run["started_at"] - run["created_at"]))
            return f"times: from the agent's start (queued and prepared {before} before it)"
        return "times: since the run was queued (the agent has not started)"

    def apply_changes(self, changes: Changes) -> None:
        if self.run_id in changes.runs:
            self.refresh_header()
        if not self.loaded:
            self._early.append(changes)
            return
        # The app applies a tick's events in slices: ones it took before the history's answer
        # can reach the screen after it, and the history holds them already.
        self._apply(changes, min_seq=self.as_of_seq)

    def _apply(self, changes: Changes, min_seq: int = 0) -> None:
        rid = self.run_id
        lines = changes.log.get(rid)
        log = self.query_one(LogView)
        if lines:
            if min_seq:
                lines = [ln for ln in lines if ln.seq > min_seq]
            log.append_lines(lines)
            self._update_log_status()
        for point in changes.metrics.get(rid, ()):
            if min_seq and getattr(point, "recv_seq", 0) <= min_seq:
                continue
            self._add_point(point.name, point.step, point.value, point.source, getattr(point, "session", None))
        if changes.metrics.get(rid):
            self._sync_series_list()
            self._redraw_charts()
        for sub in changes.submissions.get(rid, ()):
            self._put_submission(sub)
            self._revisions_dirty = True
        if changes.submissions.get(rid):
            self._redraw_charts()
        sample = changes.resources.get(rid)
        if sample is not None:
            self._show_resources(sample.cpu_percent, sample.rss_bytes, sample.n_procs, sample.gpus,
                                 (sample.load or [None])[0])
        if self._revisions_dirty and self.query_one(TabbedContent).active == "revisions":
            self.reload_revisions()

    def tick(self) -> None:
        self.refresh_header()

    def reload(self) -> None:
        """After a resync (the engine dropped events for us): read the history again."""
        self.loaded = False
        self.load_history()

    # ------------------------------------------------------------------ header and gauges
    def refresh_header(self) -> None:
        if not self.is_mounted:
            return
        run, now = self.run, self.app.clock()
        if self.loaded:
            self.query_one(LogView).set_origin(self._origin())     # moves once, when the agent starts
        state = run.get("state", "?")
        head = Text()
        head.append(f"{self.run_id}  ", style="bold")
        head.append(state + (f":{run['failure_source']}" if state == "failed" and run.get("failure_source") else ""),
                    style=STATE_STYLE.get(state, ""))
        # scores right after the id and state: on a narrow terminal the details wrap or go, not these
        head.append(f"  dev {fmt_score(run.get('baseline_dev_score'))}→{fmt_score(run.get('best_dev_score'))}"
                    f" ({fmt_delta(run.get('dev_improvement'))})  test {fmt_score(run.get('baseline_score'))}"
                    f"→{fmt_score(run.get('test_score'))} ({fmt_delta(run.get('improvement'))})")
        spark = sparkline([y for _, y in self._dev_score_points()])
        if spark:                   # the dev score of each graded submission, oldest to newest
            head.append(f"  {spark}", style="green")
        head.append(f"   {run.get('task', '')} · {run.get('agent', '')} · {run.get('model', '')} · seed {run.get('seed', '')}"
                    f"{' · driver ' + run['driver'] if run.get('driver') else ''} · {run.get('executor', '')}")
        if state in FINISHED_STATES and run.get("end_reason"):
            head.append(f"   {run['end_reason']}", style="dim")
        set_text(self.query_one("#run-header", Static), head)   # wraps on a narrow terminal: height may change
        budget = budget_s(run)
        span = agent_span(run, now)          # the agent's own time; grading/finalizing apart
        spent = span[0] if span else None
        left = time_left(run, now)
        after = fmt_after_agent(run, now)
        gauge = self.query_one("#g-budget", Gauge)
        if spent is None:
            gauge.set_value(None, f"not started · {format_duration(budget)}")
        elif left is None or after:
            gauge.set_value(min(1.0, spent / budget) if budget else None,
                            f"agent used {format_duration(spent)} of {format_duration(budget)}"
                            + (f" · {after}" if after else ""))
        else:
            gauge.set_value(spent / budget if budget else None,
                            f"{format_duration(left)} left of {format_duration(budget)}")

    def _show_resources(self, cpu, rss, n_procs, gpus, load1=None) -> None:
        machine = self.app.machine
        load = "" if load1 is None else f" · load {load1:.1f}"     # the host's: a busy machine explains a slow run
        self.query_one("#g-cpu", Gauge).set_value(
            None if cpu is None else cpu / (100 * machine["cpus"]),
            "-" if cpu is None else f"{cpu:.0f}% · {n_procs or 0} procs{load}")
        self.query_one("#g-rss", Gauge).set_value(
            None if rss is None else rss / machine["mem"], fmt_bytes(rss))
        gauge = self.query_one("#g-gpu", Gauge)
        if not gpus:
            gauge.set_value(None, "none (CPU run)")
        else:
            util = sum(g.get("util") or 0 for g in gpus) / len(gpus)
            used = sum(g.get("mem_used") or 0 for g in gpus)
            total = sum(g.get("mem_total") or 0 for g in gpus)
            ids = ",".join(str(g.get("index")) for g in gpus)
            gauge.set_value(util / 100, f"{ids}: {util:.0f}% · {fmt_bytes(used)}/{fmt_bytes(total)}")

    # ------------------------------------------------------------------ log
    def _update_log_status(self, total: int | None = None) -> None:
        log = self.query_one(LogView)
        follow = "following" if log.follow else "paused (f or end: follow)"
        search = f"  search: {log.search_term!r} match {log.match_rank} of {log.match_total}" \
            if log.search_term else ""
        set_text(self.query_one("#log-status", Static),
                 f"{self._clock_note()}  {len(log.lines)} lines in view (last {log.capacity})  {follow}{search}",
                 fixed_height=True)

    def action_toggle_follow(self) -> None:
        log = self.query_one(LogView)
        log.follow = not log.follow
        self._update_log_status()

    def action_follow_tail(self) -> None:
        self.query_one(LogView).follow = True
        self._update_log_status()

    def action_search(self) -> None:
        self.query_one(TabbedContent).active = "log"
        box = self.query_one("#search", Input)
        box.display = True
        box.focus()
        box.cursor_position = len(box.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "search":
            log = self.query_one(LogView)
            if not log.search(event.value):
                self.notify(f"no match for {event.value!r}", severity="warning")
            event.input.display = False      # n/N are commands again once the bar is closed
            log.focus()
            self._update_log_status()

    def action_next_match(self) -> None:
        log = self.query_one(LogView)
        if log.search_term and not log.search(None):
            self.notify("no further match", severity="warning")
        self._update_log_status()

    def action_previous_match(self) -> None:
        log = self.query_one(LogView)
        if log.search_term and not log.search(None, backwards=True):
            self.notify("no earlier match", severity="warning")
        self._update_log_status()

    def _close_search(self) -> None:
        self.query_one("#search", Input).display = False
        self.query_one(LogView).focus()

    def on_key(self, event) -> None:
        route_key(event, self.query_one("#search", Input), self.action_search, self._close_search)

    # ------------------------------------------------------------------ metrics
    def _add_point(self, name: str, step, value, source: str, session: int | None = None) -> None:
        if source == "grading" and not name.startswith("dev"):
            name = f"{name} (grading)"
        if session is not None:
            # one series per training session, never one line across stages: "loss", "loss [s2]", ...
            seq = self._sessions.setdefault(session, len(self._sessions) + 1)
            if seq > 1:
                self._base_name[f"{name} [s{seq}]"] = name
                name = f"{name} [s{seq}]"
        series = self.series.get(name)
        if series is None:
            series = self.series[name] = deque(maxlen=MAX_POINTS)
            self._series_x[name] = 0
        x = step if step is not None else self._series_x[name]
        self._series_x[name] += 1
        series.append((float(x), value))
        self.series_source[name] = source
        self._charts_dirty.add(name)

    def _dev_score_points(self) -> list[tuple[float, float]]:
        return [(float(s["seq"]), s["score"]) for s in sorted(self.submissions.values(), key=lambda s: s["seq"])
                if s.get("score") is not None]

    def _all_series_names(self) -> list[str]:
        names = list(self.series)
        # The grading API's scores as a series, unless the engine already records them as metrics.
        if self._dev_score_points() and "grading" not in self.series_source.values():
            names.append("dev score")
        return names

    def _sync_series_list(self) -> None:
        sel = self.query_one("#series-list", SelectionList)
        present = {opt.value for opt in sel._options}
        for name in self._all_series_names():
            if name not in present:
                chosen = self._base_name.get(name, name) in DEFAULT_SERIES
                sel.add_option((name, name, chosen))
                if chosen:
                    self.selected_series.append(name)
        if not self.selected_series and sel.option_count:
            for i in range(min(3, sel.option_count)):   # nothing familiar: show the first few
                sel.select(sel.get_option_at_index(i).value)
            self.selected_series = list(sel.selected)

    def _chart_order(self) -> list[str]:
        """Selected series, informative first (loss, reward, kl, ...), each session's after the
        previous session's; a constant series last (it says little)."""
        def key(name):
            base = self._base_name.get(name, name)
            seq = int(name.rsplit("[s", 1)[1][:-1]) if name in self._base_name else 0
            flat = is_constant(y for _, y in self.series.get(name, ())) and len(self.series.get(name, ())) > 1
            return (flat, informative_rank(base), base, seq)
        return sorted(self.selected_series, key=key)

    def action_view_line(self) -> None:
        from autorl_tui.tui.screens.prompts import LineScreen

        log = self.query_one(LogView)
        line = log.pointed_line()
        if line is None:
            self.notify("the log is empty", severity="warning")
            return
        stamp = fmt_offset(line.ts - log.origin) if log.origin else ""
        self.app.push_screen(LineScreen(f"{stamp} {line.kind} {line.level}  ({len(line.message)} characters)",
                                        line.message))

    def action_toggle_log_scale(self) -> None:
        self.log_scale = not self.log_scale
        for chart in self.query(MetricChart):
            chart.set_log_scale(self.log_scale)
        self.notify(f"metrics: {'log' if self.log_scale else 'linear'} scale")

    def on_selection_list_selected_changed(self, event: SelectionList.SelectedChanged) -> None:
        self.selected_series = list(event.selection_list.selected)
        self._redraw_charts(rebuild=True)

    def _redraw_charts(self, rebuild: bool = False) -> None:
        box = self.query_one("#charts", VerticalScroll)
        existing = {c.series_name: c for c in box.query(MetricChart)}
        if rebuild or set(existing) != set(self.selected_series):
            box.remove_children()
            existing = {}
            charts = []
            for i, name in enumerate(self._chart_order()):
                chart = MetricChart(name, color=SERIES_COLORS[i % len(SERIES_COLORS)])
                chart.log_scale = self.log_scale
                existing[name] = chart
                charts.append(chart)
            if charts:
                box.mount_all(charts)
            else:
                box.mount(Static("choose series on the left (space toggles)", classes="hint"))
            dirty = set(self.selected_series)
        else:
            dirty = self._charts_dirty | {"dev score"}
        for name in dirty:
            chart = existing.get(name)
            if chart is None:
                continue
            if name == "dev score":
                chart.set_points(self._dev_score_points(), "grading API")
            else:
                chart.set_points(list(self.series.get(name, ())), self.series_source.get(name, ""))
        self._charts_dirty.clear()

    # ------------------------------------------------------------------ submissions
    def _put_submission(self, sub: dict) -> None:
        table = self.query_one("#subs-table", DataTable)
        key = str(sub.get("id") or sub.get("seq"))
        merged = {**self.submissions.get(key, {}), **sub}
        self.submissions[key] = merged
        origin = self._origin() or 0
        note = (sub.get("error") or (f"same as #{merged['duplicate_of']}" if merged.get("duplicate_of") else "")
                or env_summary_text(merged.get("metrics")))
        imp = merged.get("improvement")
        cells = (str(merged.get("seq", "")), merged.get("status", ""), fmt_score(merged.get("score")),
                 Text(fmt_delta(imp), style="green" if imp and imp > 0 else "red" if imp and imp < 0 else ""),
                 (merged.get("content_hash") or "")[:12], str(merged.get("revision_id") or "-"),
                 fmt_offset(merged["received_at"] - origin) if merged.get("received_at") else "-",
                 fmt_offset(merged["graded_at"] - origin) if merged.get("graded_at") else "-", note or "")
        if key in table.rows:
            for col, value in zip(("seq", "status", "score", "imp", "hash", "rev", "received", "graded", "note"), cells):
                table.update_cell(key, col, value)
        else:
            table.add_row(*cells, key=key)

    # ------------------------------------------------------------------ revisions and diffs
    TAB_FOCUS = {"log": "#log-view", "metrics": "#series-list", "submissions": "#subs-table",
                 "revisions": "#rev-table"}

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self.query_one(self.TAB_FOCUS[event.pane.id]).focus()
        if event.pane.id == "revisions" and self._revisions_dirty:
            self.reload_revisions()

    @work(exclusive=True, group="revisions")
    async def reload_revisions(self) -> None:
        self._revisions_dirty = False
        try:
            self.revisions = await self.app.client.revisions(self.run_id)
        except Exception:   # noqa: BLE001 - a stale list is fine
            return
        self._fill_revisions()

    def _fill_revisions(self) -> None:
        table = self.query_one("#rev-table", DataTable)
        origin = self._origin() or 0
        for rev in self.revisions:
            key = str(rev["seq"])
            if key not in table.rows:
                table.add_row(str(rev["seq"]), fmt_offset(rev["ts"] - origin), rev["reason"], str(rev["n_files"]),
                              fmt_bytes(rev["total_bytes"]), key=key)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "rev-table" and event.row_key is not None:
            self.show_diff(int(event.row_key.value))

    @work(exclusive=True, group="diff")
    async def show_diff(self, seq: int) -> None:
        from autorl_tui.store.queries import StoreReader

        def read() -> str:
            with StoreReader.open(self.app.home.store_path) as reader:
                return reader.revision_diff(self.run_id, seq)

        text = await asyncio.to_thread(read)
        self.query_one("#diff", Static).update(Syntax(text, "diff", theme="ansi_dark", word_wrap=False))

    # ------------------------------------------------------------------ actions
    def action_back(self) -> None:
        self.app.pop_screen()

    def action_tab(self, name: str) -> None:
        self.query_one(TabbedContent).active = name

    def action_cancel_run(self) -> None:
        run = self.run
        if run["state"] in FINISHED_STATES:
            self.notify(f"the run is already {run['state']}", severity="warning")
            return
        from autorl_tui.tui.screens.prompts import ConfirmScreen

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.app.engine_command(lambda c: c.cancel(self.run_id), "cancelling the run")
        self.app.push_screen(ConfirmScreen(f"Cancel run {self.run_id} ({run['state']})?"), confirmed)

    def action_toggle_pause(self) -> None:
        state = self.run["state"]
        if state == "paused":
            self.app.engine_command(lambda c: c.resume(self.run_id), "resumed")
        elif state in ACTIVE_STATES:
            self.app.engine_command(lambda c: c.pause(self.run_id), "paused (the budget clock keeps running)")
        else:
            self.notify(f"cannot pause a {state} run", severity="warning")

    def action_extend_budget(self) -> None:
        from autorl_tui.tui.screens.prompts import InputScreen

        def chosen(value: str | None) -> None:
            if not value:
                return
            try:
                seconds = parse_duration(value)
            except UsageError as exc:
                self.notify(str(exc), severity="error")
                return
            self.app.engine_command(lambda c: c.extend_budget(self.run_id, seconds),
                                    f"budget extended by {format_duration(seconds)}")
        self.app.push_screen(InputScreen("Extend the budget by (e.g. 10m, 1h):", "10m"), chosen)

    def action_export_report(self) -> None:
        self.app.export_report(self.run_id)


"""The console's parts on their own: log ring, braille charts, event batching, plan form, the
action registry (every binding reaches a real action; help lists them all)."""

import inspect

import pytest
from textual.app import App

from autorl_tui.catalog.plans import parse_plan
from autorl_tui.daemon.client import Disconnected, Lagged
from autorl_tui.engine.events import (MetricPoint, QueueChanged, RunEventAppended, RunStateChanged,
                                      RunUpdated)
from autorl_tui.exitcodes import UsageError
from autorl_tui.tui.actions import ACTIONS, bindings
from autorl_tui.tui.app import ConsoleApp
from autorl_tui.tui.model import ConsoleModel
from autorl_tui.tui.screens.gpus import GpusScreen
from autorl_tui.tui.screens.help import help_table
from autorl_tui.tui.screens.new_plan import NewPlanScreen, plan_yaml
from autorl_tui.tui.screens.run import RunScreen
from autorl_tui.tui.screens.runs import RunsScreen, matches
from autorl_tui.tui.widgets.chart import braille_lines
from autorl_tui.tui.widgets.log_view import LogLine, LogView, clean


class LogApp(App):
    def compose(self):
        yield LogView(capacity=100)


def lines(n, prefix="line"):
    return [LogLine(float(i), "stdout", "info", f"{prefix} {i}") for i in range(n)]


async def test_log_view_ring_is_bounded_and_follows_the_tail():
    app = LogApp()
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(LogView)
        for _ in range(30):
            view.append_lines(lines(100))
        await pilot.pause()
        assert len(view.lines) == 100 and view.total == 3000
        assert view.lines[0].message == "line 0" and view.lines[-1].message == "line 99"
        assert view.scroll_y == view.max_scroll_y > 0          # following the tail
        assert "line 99" in "".join(s.text for s in view.render_line(view.scrollable_content_region.height - 1))


async def test_log_view_pausing_keeps_the_viewed_lines_in_place():
    app = LogApp()
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(LogView)
        view.append_lines(lines(60, "old"))
        await pilot.pause()
        view.scroll_to(y=10, animate=False, immediate=True)   # the operator scrolls up
        await pilot.pause()
        assert view.follow is False
        top = view.lines[int(view.scroll_y)].message
        view.append_lines(lines(50, "new"))                   # 10 old lines fall out of the ring
        await pilot.pause()
        assert view.lines[int(view.scroll_y)].message == top
        view.follow = True
        await pilot.pause()
        assert view.scroll_y == view.max_scroll_y


async def test_log_view_search_jumps_between_matches():
    app = LogApp()
    async with app.run_test(size=(80, 10)) as pilot:
        view = app.query_one(LogView)
        view.append_lines([LogLine(0, "stdout", "info", "noise") for _ in range(40)])
        view.append_lines([LogLine(0, "stderr", "error", "Traceback: boom")])
        view.append_lines([LogLine(0, "stdout", "info", "noise") for _ in range(40)])
        view.append_lines([LogLine(0, "stderr", "error", "second BOOM")])
        await pilot.pause()
        view.scroll_to(y=0, animate=False, immediate=True)
        assert view.search("boom") and view.match_index == 40
        assert (view.match_rank, view.match_total) == (1, 2)   # "match 1 of 2"
        assert view.follow is False
        assert view.search(None) and view.match_index == 81
        assert (view.match_rank, view.match_total) == (2, 2)
        assert not view.search(None)                 # no further match
        assert view.search(None, backwards=True) and view.match_index == 40
        assert not view.search("absent") and view.match_total == 0


async def test_log_view_does_not_repeat_the_kind_that_starts_a_message():
    app = LogApp()
    async with app.run_test(size=(80, 10)) as pilot:
        view = app.query_one(LogView)
        view.append_lines([LogLine(0, "state", "info", "state queued → preparing"),
                           LogLine(0, "stdout", "info", "stateless words")])
        await pilot.pause()
        first = "".join(s.text for s in view.render_line(0)).split()
        assert first == ["state", "queued", "→", "preparing"]          # was: state state queued → …
        assert "stateless words" in "".join(s.text for s in view.render_line(1))


class ThemedLogApp(App):
    CSS = """
    LogView > .log-view--stderr { color: #00ff00; text-style: italic; }
    LogView > .log-view--current-match { text-style: underline; }
    """

    def compose(self):
        yield LogView(capacity=100)


async def test_log_view_colours_are_component_classes_an_app_css_restyles():
    def styles(view, y):
        segments = [s for s in view.render_line(y) if s.text.strip()]
        return {s.text.strip(): s.style for s in segments}

    rows = [LogLine(0, "stderr", "info", "oops"), LogLine(0, "harness", "info", "note"),
            LogLine(0, "stdout", "error", "bad"), LogLine(0, "nonsense", "info", "plain")]
    for app_class, stderr_color, italic in ((LogApp, "color(9)", False), (ThemedLogApp, "#00ff00", True)):
        app = app_class()
        async with app.run_test(size=(80, 10)) as pilot:
            view = app.query_one(LogView)
            view.append_lines(rows)
            await pilot.pause()
            oops = styles(view, 0)["oops"]
            assert oops.color.name == stderr_color and bool(oops.italic) is italic
            assert styles(view, 0)["stderr"].dim                     # the category column is dimmed
            assert styles(view, 1)["note"].color.number == 6         # harness: cyan (not restyled)
            bad = styles(view, 2)["bad"]                            # the level wins over the kind
            assert bad.color.number == 1 and bad.bold
            assert styles(view, 3)["plain"].color == view.rich_style.color   # unknown kind: unstyled
            assert view.search("oop")
            hit = styles(view, 0)["oop"]
            assert (bool(hit.reverse), bool(hit.underline)) == ((False, True) if italic else (True, False))


def test_clean_removes_control_characters():
    assert clean("a\tb\x1b[31mc\r\nd\n") == "a    b [31mc ⏎ d"


def test_braille_plots_a_rising_line_bottom_left_to_top_right():
    rows = braille_lines([(0, 0.0), (1, 1.0)], width=4, height=2)
    assert len(rows) == 2 and all(len(r) == 4 for r in rows)
    assert rows[1][0] != "⠀" and rows[0][-1] != "⠀"       # starts low left, ends high right
    assert rows[0][0] == "⠀" and rows[1][-1] == "⠀"
    assert braille_lines([], 3, 1) == ["⠀⠀⠀"]
    assert len(braille_lines([(0, float("nan")), (1, 2.0)], 5, 3)) == 3   # NaN skipped, no crash


def test_model_applies_a_batch_and_reports_what_changed():
    model = ConsoleModel()
    model.load_snapshot({"runs": [{"id": "r1", "state": "queued", "baseline_score": 50.0,
                                   "baseline_dev_score": 20.0, "best_dev_score": None}]})
    ch = model.apply([
        RunStateChanged("r1", state="running", previous="queued", ts=100.0),
        RunEventAppended("r1", kind="stdout", message="hello"),
        MetricPoint("r1", name="loss", value=0.5, step=1, source="metrics_jsonl"),
        RunUpdated("r1", fields={"best_dev_score": 30.0, "improvement": 10.0}),
        RunUpdated("r9", fields={"x": 1}),
        QueueChanged(None, paused=True),
    ])
    assert model.runs["r1"]["state"] == "running" and model.runs["r1"]["started_at"] == 100.0
    assert ch.runs == {"r1"} and ch.unknown_runs == {"r9"} and ch.queue and model.queue_paused
    assert [ln.message for ln in ch.log["r1"]] == ["hello"] and ch.metrics["r1"][0].name == "loss"
    assert ch.beat_baseline == ["r1"]
    again = model.apply([RunUpdated("r1", fields={"best_dev_score": 35.0})])
    assert again.beat_baseline == []                     # announced once
    marks = model.apply([Lagged(5), Disconnected("bye")])
    assert marks.resync and marks.disconnected == "bye"


def test_a_batch_applied_in_slices_changes_what_it_changes_in_one():
    events = [RunStateChanged("r1", state="running", previous="queued", ts=100.0),
              *(RunEventAppended("r1", kind="stdout", message=f"line {i}") for i in range(7)),
              MetricPoint("r1", name="loss", value=0.5, step=1, source="metrics_jsonl"),
              RunEventAppended("r2", kind="stderr", message="other run"),
              RunUpdated("r1", fields={"best_dev_score": 30.0}), RunUpdated("r9", fields={"x": 1}),
              QueueChanged(None, paused=True), Lagged(3), RunEventAppended("r1", kind="stdout", message="last")]
    snapshot = {"runs": [{"id": "r1", "state": "queued", "baseline_dev_score": 20.0, "best_dev_score": None},
                         {"id": "r2", "state": "running"}]}
    whole, sliced = ConsoleModel(), ConsoleModel()
    whole.load_snapshot(snapshot)
    sliced.load_snapshot(snapshot)
    once = whole.apply(events)
    merged = sliced.apply(events[:3])
    for k in range(3, len(events), 4):
        merged = merged.merge(sliced.apply(events[k:k + 4]))
    assert vars(merged) == vars(once) and whole.runs == sliced.runs
    assert [ln.message for ln in merged.log["r1"]] == [f"line {i}" for i in range(7)] + ["last"]
    assert merged.n_events == len(events) and merged.resync and merged.dropped == 3 and merged.beat_baseline == ["r1"]


def test_trust_flags_become_toasts_and_records_do_not():
    model = ConsoleModel()
    model.load_snapshot({"runs": [{"id": "r1", "state": "running"}]})
    ch = model.apply([RunEventAppended("r1", kind="trust", level="error", message="the agent read the decoy x"),
                      RunEventAppended("r1", kind="trust", level="info", message="submission 1: derived"),
                      RunEventAppended("r1", kind="stdout", level="error", message="not a finding")])
    assert [e.message for e in ch.trust_flags] == ["the agent read the decoy x"]


def test_filter_terms_and_fields():
    run = {"id": "r0001-arith-x-s0", "task": "arith", "agent": "scripted", "state": "failed", "model": "tiny"}
    assert matches(run, "arith") and matches(run, "state:fail agent:script") and not matches(run, "state:done")


def test_plan_form_yaml_parses_into_the_matrix():
    text = plan_yaml("p", ["arith", "gsm"], ["a"], ["tiny"], "0, 1,2", "90s", "local", "0", "3")
    plan = parse_plan(text)
    assert len(plan.runs) == 6 and plan.runs[0].budget_s == 90 and plan.runs[0].priority == 3
    with pytest.raises(UsageError, match="seeds must be integers"):
        parse_plan(plan_yaml("p", ["arith"], ["a"], [], "x", "10m", "local", "0", "0"))


SCREENS = {"app": ConsoleApp, "runs": RunsScreen, "run": RunScreen, "new_plan": NewPlanScreen, "gpus": GpusScreen}


def test_every_registered_action_has_a_handler_and_is_in_help():
    for action in ACTIONS:
        name = action.name.split("(")[0]
        owner = SCREENS[action.scope]
        assert callable(getattr(owner, f"action_{name}", None)), f"{action.scope}: no action_{name}"
    help_text = str([str(c) for col in help_table().columns for c in col._cells])
    for action in ACTIONS:
        assert action.description in help_text
    assert [b.action for b in bindings("runs")] == [a.name for a in ACTIONS if a.scope == "runs"]
    assert RunsScreen.BINDINGS == bindings("runs")


def test_screens_take_their_bindings_from_the_registry():
    for scope, owner in SCREENS.items():
        assert [b.key for b in owner.BINDINGS] == [a.key for a in ACTIONS if a.scope == scope]
    assert inspect.isclass(RunScreen)


def test_elapsed_budget_counts_the_agent_and_shows_grading_apart():
    """`1m58s/1m30s` looked like an overrun: it counted held-out grading after the agent's 90 s."""
    from autorl_tui.tui.formatting import fmt_elapsed_budget, fmt_liveness

    done = {"state": "done", "started_at": 1000.0, "deadline": 1090.0, "ended_at": 1118.0, "budget_s": 90.0}
    assert fmt_elapsed_budget(done, now=5000.0) == "1m30s/1m30s"
    assert fmt_liveness(done, now=5000.0) == "graded +28s"
    # an agent that stopped early (its end seen live) is not charged for the grading either
    early = {**done, "agent_ended_at": 1040.0, "ended_at": 1070.0}
    assert fmt_elapsed_budget(early, now=5000.0) == "40s/1m30s" and fmt_liveness(early, now=5000.0) == "graded +30s"
    running = {"state": "running", "started_at": 1000.0, "deadline": 1090.0, "budget_s": 90.0}
    assert fmt_elapsed_budget(running, now=1030.0) == "30s/1m30s"


def test_sparkline_runs_lowest_to_highest():
    from autorl_tui.tui.widgets.chart import sparkline

    assert sparkline([18.0, 40.0, 66.5]) == "▁▄█"
    assert sparkline([5.0, 5.0]) == "▅▅" and sparkline([]) == ""
    assert len(sparkline(list(range(100)), width=16)) == 16          # the newest 16


class ChartApp(App):
    def compose(self):
        from autorl_tui.tui.widgets.chart import MetricChart
        yield MetricChart("loss")


async def test_metric_chart_has_a_step_axis_a_log_scale_and_states_a_single_point():
    from autorl_tui.tui.widgets.chart import MetricChart

    app = ChartApp()
    async with app.run_test(size=(60, 10)) as pilot:
        chart = app.query_one(MetricChart)
        chart.set_points([(10.0, 1000.0), (20.0, 10.0), (30.0, 0.1)])
        await pilot.pause()
        lines = str(chart.render()).splitlines()
        assert lines[-1].split()[0] == "step└10" and lines[-1].split()[-1] == "30"   # the x axis: steps
        linear_middle = lines[3]
        chart.set_log_scale(True)
        lines = str(chart.render()).splitlines()
        assert "log" in lines[-1] and lines[3] != linear_middle     # 10 sits mid-way on a log axis
        chart.set_points([(10.0, 1.0), (20.0, -1.0)])
        assert "log scale needs positive values" in str(chart.render())
        chart.set_points([(7.0, 0.5)])
        assert "one point: 0.5 at step 7" in str(chart.render())


def test_a_run_waiting_for_its_cluster_says_so_in_the_runs_table():
    """executor ray: the engine records `waiting` (RunUpdated) while the cluster is unreachable;
    the Runs table's liveness column says it, and goes back to the step when it is cleared."""
    from autorl_tui.tui.formatting import fmt_liveness

    model = ConsoleModel()
    model.runs["r1"] = {"id": "r1", "state": "running", "step": 12, "last_event_at": 990.0}
    model.apply([RunUpdated("r1", fields={"waiting": "cluster"})])
    run = model.runs["r1"]
    assert fmt_liveness(run, now=run["last_event_at"] + 12) == "waiting for cluster · 12s ago"
    model.apply([RunUpdated("r1", fields={"waiting": None})])
    assert fmt_liveness(run, now=run["last_event_at"] + 12) == "step 12 · 12s ago"

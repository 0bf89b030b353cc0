"""What a flood of log lines costs the console per frame: no layout pass of the screen for a batch
of lines or a status line, each line rendered once however far the tail moves, and a full ring
that adds nothing to the garbage collector's full collections (benchmarks/bench_console.py
measures the effect on key latency)."""

import gc

from textual.app import App
from textual.screen import Screen
from textual.widgets import Static

import autorl_tui.tui.widgets.log_view as log_view_module
from autorl_tui.tui.widgets.log_view import LogLine, LogView
from autorl_tui.tui.widgets.text_line import set_text


class FloodApp(App):
    CSS = "#status { height: 1; }"

    def compose(self):
        yield Static(id="status")
        yield LogView(capacity=500)


def batch(start, n):
    return [LogLine(float(i), "stdout", "info", f"step {i}: loss=0.{i:04d}") for i in range(start, start + n)]


def count_layouts(screen: Screen) -> list:
    calls = []
    original = screen._refresh_layout

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)
    screen._refresh_layout = counted
    return calls


async def test_a_batch_of_lines_and_a_status_line_cost_no_layout_pass():
    app = FloodApp()
    async with app.run_test(size=(80, 20)) as pilot:
        view, status = app.query_one(LogView), app.query_one("#status", Static)
        view.append_lines(batch(0, 50))          # the scrollbar appears: one layout is due here
        await pilot.pause()
        layouts = count_layouts(app.screen)
        for i in range(1, 20):
            view.append_lines(batch(i * 50, 50))
            set_text(status, f"{len(view.lines)} lines", fixed_height=True)
            await pilot.pause()
        assert layouts == [], f"{len(layouts)} layout passes for 19 batches"
        assert view.scroll_y == view.max_scroll_y > 0                      # still following the tail
        last = "".join(s.text for s in view.render_line(view.scrollable_content_region.height - 1))
        assert "step 999:" in last
        assert "500 lines" in str(status.render())


async def test_following_the_tail_renders_each_line_once(monkeypatch):
    app = FloodApp()
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(LogView)
        view.append_lines(batch(0, 100))
        await pilot.pause()
        rendered = []
        original = log_view_module.clean
        monkeypatch.setattr(log_view_module, "clean", lambda m: rendered.append(m) or original(m))
        for i in range(30):                     # one line at a time: every visible line moves up a row
            view.append_lines(batch(100 + i, 1))
            await pilot.pause()
        height = view.scrollable_content_region.height
        assert len(rendered) <= 30 + height, f"{len(rendered)} line renders for 30 new lines ({height} in view)"


async def test_a_full_ring_is_not_tracked_by_the_garbage_collector():
    app = FloodApp()
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(LogView)
        for i in range(4):
            view.append_lines(batch(i * 500, 500))
        await pilot.pause()
        gc.collect()
        assert len(view.lines) == 500 and view.lines[-1].message.startswith("step 1999:")
        def is_log_line(o):     # type(), not isinstance(): no lazy proxy in the heap is touched
            if type(o) is LogLine:
                return True
            return type(o) is tuple and len(o) == 5 and type(o[3]) is str and o[3].startswith("step ")
        tracked = [o for o in gc.get_objects() if is_log_line(o)]
        assert tracked == [], f"{len(tracked)} log lines tracked by the collector"


def test_a_chunk_of_lines_is_decoded_in_one_call_and_a_bad_line_still_fails():
    from autorl_tui.daemon.client import decode_lines

    assert decode_lines([b'{"event": {"a": 1}}', b"", b'{"id": 2, "ok": true}']) == [
        {"event": {"a": 1}}, {"id": 2, "ok": True}]
    assert decode_lines([]) == [] and decode_lines([b""]) == []
    try:
        decode_lines([b'{"a": 1}', b"not json"])
    except ValueError:
        pass
    else:
        raise AssertionError("a line that is not JSON must fail the read, as it did line by line")

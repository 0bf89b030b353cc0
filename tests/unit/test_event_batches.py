"""A batch of agent lines is recorded and published at once (issue 36, ingestion): one store call,
one offer per subscriber, the same rows and events, in order, as line-by-line logging; a
subscriber that falls behind is marked lagged with what it missed counted."""

import asyncio

from autorl_tui.engine.events import EventBus, RunEventAppended
from autorl_tui.engine.run_journal import RunJournal
from autorl_tui.store.db import Store
from autorl_tui.store.records import RunRecord


def test_a_batch_of_lines_is_stored_and_published_in_order(tmp_path):
    store = Store(tmp_path / "store.db")
    bus = EventBus()
    sub = bus.subscribe()
    journal = RunJournal(store, bus, RunRecord(id="r1", task="arith", agent="a", model="tiny", state="running",
                                               budget_s=60, created_at=0.0, current_attempt=2))
    lines = [("stdout", f"line {i}", "info") for i in range(5)] + [("stderr", "oops", "stderr")]
    journal.log_lines("stdout", [f"line {i}" for i in range(5)])
    journal.log_lines("stderr", ["oops"], level="stderr")
    journal.log("harness", "after the batch")
    store.flush()
    rows = store.query("SELECT run_id, attempt, kind, level, message, data FROM events ORDER BY id")
    assert [(r["kind"], r["message"], r["level"]) for r in rows] == lines + [("harness", "after the batch", "info")]
    assert {(r["run_id"], r["attempt"]) for r in rows} == {("r1", 2)} and rows[0]["data"] is None
    published = sub.drain()
    assert all(type(e) is RunEventAppended and e.run_id == "r1" for e in published)
    assert [(e.kind, e.message, e.level) for e in published] == [(k, m, lv) for k, m, lv in lines] + [
        ("harness", "after the batch", "info")]
    journal.log_lines("stdout", [])             # nothing: no row, no event
    assert store.pending() == 0 and sub.drain() == []
    store.close()


def test_lines_are_stored_as_printed_between_the_events_around_them(tmp_path):
    """A batch of lines is one statement over a JSON array: every text survives it exactly (a NUL,
    which that statement would cut, sends its batch row by row), in order among single events."""
    store = Store(tmp_path / "store.db")
    tricky = ["tab\tq\"uote\\ back/slash", "emoji 😀 ü ß 中", "\x1b[31mred\x1b[0m", "", " ", "\u2028\u2029",
              "\ufffd", "x" * 70_000, "ctrl\x01\x7f", "[1, 2]", "null", "\\u0000 typed out"]
    store.append_event("r1", "harness", "before", attempt=1)
    store.append_lines("r1", 1, 5.0, "stdout", "info", tricky)
    store.append_event("r1", "harness", "between", attempt=1, data={"k": 1})
    store.append_lines("r1", 1, 6.0, "stderr", "stderr", ["nul \x00 inside", "after it"])
    store.append_event("r1", "harness", "after", attempt=1)
    store.flush()
    rows = store.query("SELECT ts, kind, level, message, data FROM events ORDER BY id")
    assert [r["message"] for r in rows] == ["before", *tricky, "between", "nul \x00 inside", "after it", "after"]
    assert all(type(r["message"]) is str for r in rows)
    assert [(r["ts"], r["kind"], r["level"], r["data"]) for r in rows[1:1 + len(tricky)]] == [
        (5.0, "stdout", "info", None)] * len(tricky)
    assert (rows[-3]["ts"], rows[-3]["kind"], rows[-3]["level"]) == (6.0, "stderr", "stderr")
    store.close()


def test_a_batch_of_events_is_what_the_constructor_makes():
    built = RunEventAppended.lines("r1", 12.5, "stderr", "stderr", ["a", "b"])
    made = [RunEventAppended("r1", kind="stderr", message=m, level="stderr", ts=12.5) for m in ("a", "b")]
    assert built == made and [e.to_dict() for e in built] == [e.to_dict() for e in made]
    assert all(type(e) is RunEventAppended and vars(e) == vars(m) for e, m in zip(built, made))
    assert RunEventAppended.lines("r1", 1.0, "stdout", "info", []) == []


def test_a_subscriber_behind_is_marked_lagged_and_a_waiting_one_is_woken():
    async def scenario():
        bus = EventBus()
        small = bus.subscribe(maxsize=3)
        waiting = bus.subscribe()
        getter = asyncio.ensure_future(waiting.get())
        await asyncio.sleep(0)                 # the getter waits on an empty subscription
        assert not getter.done()
        bus.publish_many([RunEventAppended("r1", kind="stdout", message=str(i)) for i in range(5)])
        first = await asyncio.wait_for(getter, 5)
        assert first.message == "0" and [e.message for e in waiting.drain()] == ["1", "2", "3", "4"]
        assert small.lagged and small.dropped == 2
        assert [e.message for e in small.drain()] == ["0", "1", "2"]
        try:                                    # a get cancelled while it waits loses nothing
            await asyncio.wait_for(waiting.get(), 0.01)
        except asyncio.TimeoutError:
            pass
        bus.publish(RunEventAppended("r1", kind="stdout", message="5"))
        assert (await asyncio.wait_for(waiting.get(), 5)).message == "5"
        small.close()
        small.drain()
        bus.publish(RunEventAppended("r1", kind="stdout", message="6"))
        assert small.drain() == [] and [e.message for e in waiting.drain()] == ["6"]

    asyncio.run(scenario())

"""The host's load average recorded with each resource sample of a run (issue 38): the sampler
reads it, the store keeps it, the event carries it to the console (CPU gauge) and the report
shows it (tests/functional/test_reports_run.py). Real psutil/os readings, a real Store, the
real engine server and console."""

import os

from autorl_tui.engine.events import ResourceSample, event_from_dict
from autorl_tui.instrument.resources import ProcessTreeSampler
from autorl_tui.home import Home
from autorl_tui.store.db import Store
from autorl_tui.tui.app import ConsoleApp
from autorl_tui.tui.widgets.gauge import Gauge
from tests.functional.test_console_actions import RID, until
from tests.support.static_engine import T0, ServedEngine


def test_a_sample_carries_the_host_load_into_the_store(tmp_path):
    before = os.getloadavg()
    sample = ProcessTreeSampler().sample([os.getpid()])
    after = os.getloadavg()
    assert len(sample["load"]) == 3
    for got, lo, hi in zip(sample["load"], before, after):
        assert min(lo, hi) - 0.01 <= got <= max(lo, hi) + 0.01
    store = Store(tmp_path / "store.db")
    store.append_resource("r1", ts=T0, **sample)
    store.append_resource("r1", ts=T0 + 10, cpu_percent=1.0, rss_bytes=1, n_procs=1)     # an older writer: no load
    store.flush()
    rows = store.query("SELECT load1, load5, load15 FROM resources WHERE run_id = 'r1' ORDER BY ts")
    assert [rows[0]["load1"], rows[0]["load5"], rows[0]["load15"]] == sample["load"]
    assert rows[1] == {"load1": None, "load5": None, "load15": None}
    store.close()
    ev = ResourceSample("r1", cpu_percent=1.0, rss_bytes=1, n_procs=1, load=sample["load"])
    assert event_from_dict(ev.to_dict()).load == sample["load"]


async def test_the_cpu_gauge_says_the_host_load(tmp_path):
    with ServedEngine(Home.open(str(tmp_path / "h"))) as served:
        app = ConsoleApp(served.home, notify_events=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: len(app.model.runs) == 3, what="the snapshot")
            app.open_run(RID)
            gauge = lambda: app.screen.query_one("#g-cpu", Gauge).text   # noqa: E731
            await until(pilot, lambda: hasattr(app.screen, "loaded") and app.screen.loaded, what="the run screen")
            assert "load" not in gauge()              # the fixture's sample predates the load
            served.loop.call_soon_threadsafe(lambda: served.engine.bus.publish(
                ResourceSample(RID, cpu_percent=150.0, rss_bytes=2**30, n_procs=4, load=[7.25, 5.0, 3.5])))
            await until(pilot, lambda: gauge() == "150% · 4 procs · load 7.2", what="the gauge")

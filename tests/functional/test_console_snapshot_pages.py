"""The console's snapshot at scale (issue 36, the console's side): run summaries without their
spec (the spec comes with a run's history), read in pages, and a re-attaching console sent only
the runs that changed. Real EngineServer over a real Store and a real Unix socket; the console
driven by Textual's pilot; the engine is stopped and started again for the re-attach."""

import json

import pytest

from autorl_tui.daemon.client import EngineClient
from autorl_tui.engine.events import SubmissionUpdated
from autorl_tui.daemon.server import CatalogSources, EngineServer
from autorl_tui.home import Home
from autorl_tui.tui.app import ConsoleApp
from tests.functional.test_console_actions import until
from tests.support.static_engine import T0, StaticEngine

N_RUNS = 1000
SPEC = {"task": {"id": "arith", "card": "x" * 1200}, "agent": {"name": "scripted", "env": {"K": "v" * 200}}}


def fill(store, n=N_RUNS):
    base = dict(plan_id=None, plan_name="big", level=1, model="tiny", budget_s=600.0, executor="local",
                gpus_requested=0, spec=SPEC, task="arith", agent="scripted", state="done", current_attempt=1)
    store.insert_many("runs", [{**base, "id": f"r{i:05d}-arith-scripted-s0", "seed": i % 3,
                                "created_at": T0 + i, "started_at": T0 + i, "ended_at": T0 + i + 50,
                                "best_dev_score": float(i % 100), "baseline_dev_score": 10.0}
                               for i in range(n)])


async def serve(home):
    engine = StaticEngine(home)
    server = EngineServer(engine, home.socket_path, catalog=CatalogSources(home_root=home.root))
    await server.start()
    return engine, server


@pytest.fixture
async def big(tmp_path):
    home = Home.open(str(tmp_path / "h"))
    engine, server = await serve(home)
    fill(engine.store)
    yield home, engine, server
    await server.close()
    engine.store.close()


async def test_summaries_in_pages_then_only_what_changed(big):
    home, engine, _ = big
    async with await EngineClient.connect(home) as client:
        whole = await client.snapshot()
        assert len(whole["runs"]) == N_RUNS and whole["next"] is None and whole["total"] == N_RUNS
        assert all("spec" not in r and r["digest"] for r in whole["runs"])
        full_rows = engine.runs()                           # what the snapshot sent before: rows with specs
        raw = await client.call("snapshot")                 # what the wire carries
        sent, before = len(json.dumps(raw)), len(json.dumps(full_rows))
        assert sent * 4 < before, f"summaries {sent} bytes vs full rows {before} bytes"

        pages = [p async for p in client.snapshot_pages(300)]
        assert [len(p["runs"]) for p in pages] == [300, 300, 300, 100]
        ids = [r["id"] for p in pages for r in p["runs"]]
        assert ids == sorted(ids, reverse=True) and len(set(ids)) == N_RUNS        # newest first, each once

        known = {r["id"]: (r["created_at"], r["digest"]) for r in whole["runs"]}
        changed = ["r00007-arith-scripted-s0", "r00500-arith-scripted-s0", "r00999-arith-scripted-s0"]
        for rid in changed:
            engine.store.update("runs", rid, {"best_dev_score": 99.5})
        pages = [p async for p in client.snapshot_pages(300, known=known)]
        assert sorted(r["id"] for p in pages for r in p["runs"]) == sorted(changed)
        assert sum(p["unchanged"] for p in pages) == N_RUNS - 3
        assert all(r["best_dev_score"] == 99.5 for p in pages for r in p["runs"])

        hist = await client.run_history(changed[0])          # the spec: on demand, with the run
        assert hist["run"]["spec"] == SPEC

        with pytest.raises(Exception, match="page_size must be a positive integer"):
            await client.snapshot(page_size=0)


async def test_a_reread_sends_one_hash_per_unchanged_page_not_every_digest(big):
    home, engine, _ = big
    async with await EngineClient.connect(home) as client:
        known = {r["id"]: (r["created_at"], r["digest"]) for p in [p async for p in client.snapshot_pages(300)]
                 for r in p["runs"]}
        requests: list[dict] = []
        call = client._call

        async def counted(cmd, args):
            requests.append(args)
            return await call(cmd, args)
        client._call = counted
        pages = [p async for p in client.snapshot_pages(300, known=known)]
        assert [len(p["runs"]) for p in pages] == [0, 0, 0, 0] and sum(p["unchanged"] for p in pages) == N_RUNS
        assert len(requests) == 4 and all("known" not in a for a in requests)
        assert len(json.dumps(requests)) < 1000         # the digests of 1,000 runs are ~45 kB

        requests.clear()
        engine.store.update("runs", "r00500-arith-scripted-s0", {"best_dev_score": 77.0})
        pages = [p async for p in client.snapshot_pages(300, known=known)]
        assert [r["id"] for p in pages for r in p["runs"]] == ["r00500-arith-scripted-s0"]
        assert sum(p["unchanged"] for p in pages) == N_RUNS - 1
        with_digests = [a for a in requests if "known" in a]   # only the page holding the changed run
        assert len(requests) == 5 and len(with_digests) == 1 and "r00500-arith-scripted-s0" in with_digests[0]["known"]


async def test_a_reattaching_console_is_sent_only_the_changed_runs(big):
    home, engine, server = big
    app = ConsoleApp(home, notify_events=False)
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: len(app.model.runs) == N_RUNS, what="the first snapshot")
        assert app.snapshot_runs_received == N_RUNS
        table = app.screen.query_one("#runs")
        await server.close()                                # the engine goes away ...
        await until(pilot, lambda: not app.connected, what="the console to notice")
        engine.store.update("runs", "r00998-arith-scripted-s0", {"state": "failed", "end_reason": "boom"})
        engine.store.insert("runs", {**{k: v for k, v in engine.store.run("r00001-arith-scripted-s0").items()},
                                     "id": "r01000-arith-scripted-s0", "created_at": T0 + 5000})
        server2 = EngineServer(engine, home.socket_path, catalog=CatalogSources(home_root=home.root))
        await server2.start()                               # ... and a new one serves the home
        try:
            await until(pilot, lambda: app.connected and len(app.model.runs) == N_RUNS + 1, timeout=60,
                        what="the re-attach")
            assert app.snapshot_runs_received == N_RUNS + 2      # the changed run and the new one
            assert app.model.runs["r00998-arith-scripted-s0"]["state"] == "failed"
            await until(pilot, lambda: "failed" in str(table.get_cell("r00998-arith-scripted-s0", "state")),
                        what="the row redrawn")
        finally:
            await server2.close()


async def test_the_runs_table_draws_each_runs_dev_trend(big):
    home, engine, _ = big
    rid = "r00999-arith-scripted-s0"
    for seq, score in enumerate((20.0, 35.0, 30.0, 60.0), start=1):
        engine.store.insert("submissions", {"run_id": rid, "seq": seq, "path": "m", "received_at": T0 + seq,
                                            "status": "scored", "score": score})
    app = ConsoleApp(home, notify_events=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: len(app.model.runs) == N_RUNS, what="the snapshot")
        table = app.screen.query_one("#runs")
        assert str(table.get_cell(rid, "trend")) == "▁▄▃█"          # at 80 columns too
        assert str(table.get_cell("r00998-arith-scripted-s0", "trend")) == ""
        engine.bus.publish(SubmissionUpdated(rid, submission={"seq": 5, "status": "scored", "score": 10.0}))
        await until(pilot, lambda: str(table.get_cell(rid, "trend")) == "▂▅▄█▁", what="the live point")


async def test_a_home_of_many_runs_shows_the_first_rows_and_the_filter_finds_the_rest(big):
    home, engine, _ = big
    app = ConsoleApp(home, notify_events=False)
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: len(app.model.runs) == N_RUNS, what="the snapshot")
        table = app.screen.query_one("#runs")
        hint = app.screen.query_one("#runs-hint")
        await until(pilot, lambda: table.row_count == 500, what="the first rows")
        assert "r00999-arith-scripted-s0" in table.rows and "r00042-arith-scripted-s0" not in table.rows
        assert str(hint.render()).startswith(f"the first 500 of {N_RUNS} runs ({N_RUNS} in all; / filters)")
        await pilot.press("slash", *"r00042", "enter")
        await until(pilot, lambda: table.row_count == 1, what="the filter")
        assert "r00042-arith-scripted-s0" in table.rows
        assert str(hint.render()).startswith(f"1 of {N_RUNS} runs")

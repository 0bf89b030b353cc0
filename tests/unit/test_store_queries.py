"""The typed read side of the store: records match the migrated schema, and the named queries
return what the writer committed, read-only."""

import sqlite3
from dataclasses import FrozenInstanceError, fields

import pytest

from autorl_tui.run_ids import resolve_run_id
from autorl_tui.exitcodes import UsageError
from autorl_tui.store import Store
from autorl_tui.store.db import StoreError
from autorl_tui.store.imported_runs import write_imported_run
from autorl_tui.store.queries import StoreReader
from autorl_tui.store.records import RECORDS, RunRecord
from autorl_tui.store.run_spec import RunSpec


def _run(store: Store, run_id: str, *, state="done", created_at=1.0, plan="p", **extra) -> None:
    store.insert("runs", {"id": run_id, "plan_name": plan, "task": "arith", "agent": "ref", "model": "tiny",
                          "seed": 0, "budget_s": 60.0, "state": state, "created_at": created_at,
                          "spec": {"isolation": "bwrap"}, **extra})


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "store.db")
    yield s
    s.close()


def test_every_record_has_exactly_its_tables_columns_in_order(store):
    for record in RECORDS:
        columns = [r["name"] for r in store.query(f"PRAGMA table_info({record.TABLE})")]
        assert [f.name for f in fields(record)] == columns, record.__name__


def test_a_new_run_record_is_stored_and_read_back_as_itself(store):
    """RunRecord's defaults are the schema's: a run written as a record of a few columns reads back
    (by the reader and as the engine's dict row) equal to it."""
    new = RunRecord(id="r0009-a", task="arith", agent="ref", model="tiny", budget_s=60.0, state="queued",
                    created_at=5.0, spec=RunSpec(task={"id": "arith"}, isolation="bwrap"))
    store.add_run(new)
    with StoreReader.open(store.path) as reader:
        assert reader.run("r0009-a") == new
    assert RunRecord.from_row(store.run("r0009-a")) == new
    assert store.run("r0009-a")["spec"] == new.spec.to_dict()
    defaults = {r["name"]: r["dflt_value"] for r in store.query("PRAGMA table_info(runs)") if r["dflt_value"]}
    assert {k: getattr(new, k) for k in defaults} == {k: type(getattr(new, k))(v.strip("'"))
                                                      for k, v in defaults.items()}


def test_the_engines_row_types_name_exactly_their_tables_columns(store):
    # The engine's rows of these tables stay dicts (events and the socket carry them as they are);
    # their TypedDicts must name the table's columns, so a migration cannot leave one behind. The
    # runs and submissions tables have one typed row each, RunRecord and SubmissionRecord (checked above).
    from autorl_tui.store.engine_records import AttemptRow, BaselineRow

    for table, row in (("attempts", AttemptRow), ("baselines", BaselineRow)):
        columns = [r["name"] for r in store.query(f"PRAGMA table_info({table})")]
        assert list(row.__annotations__) == columns, row.__name__


def test_runs_are_filtered_newest_first_and_decoded(store, tmp_path):
    _run(store, "r0001-a", created_at=1.0)
    _run(store, "r0002-a", created_at=2.0, state="failed", plan="other")
    _run(store, "r0003-a", created_at=3.0, state="running")
    with StoreReader.open(tmp_path / "store.db") as reader:
        assert [r.id for r in reader.runs()] == ["r0003-a", "r0002-a", "r0001-a"]
        assert [r.id for r in reader.runs(states=["done", "failed"])] == ["r0002-a", "r0001-a"]
        assert [r.id for r in reader.runs(states=["done", "failed"], plan="p")] == ["r0001-a"]
        assert [r.id for r in reader.finished_runs()] == ["r0001-a", "r0002-a"]   # oldest first
        run = reader.run("r0002-a")
        assert isinstance(run, RunRecord) and run.state == "failed" and run.spec.isolation == "bwrap"
        assert run.spec.to_dict() == {"isolation": "bwrap"}     # decoded as a RunSpec, stored shape kept
        assert run.to_dict()["plan_name"] == "other" and run.wall_s is None
        assert reader.run("r9999") is None
        with pytest.raises(FrozenInstanceError):
            run.state = "done"


def test_run_id_prefixes_are_literal_and_resolve_by_the_one_rule(store, tmp_path):
    for rid in ("r0001-a_b", "r0001xa-b", "r0010-c", "r00100-d"):
        _run(store, rid)
    with StoreReader.open(tmp_path / "store.db") as reader:
        assert reader.run_ids_starting("r0001-a_") == ["r0001-a_b"]    # `_` is no wildcard
        assert reader.run_ids_starting("r0001%") == []
        assert reader.run_ids_starting("R0001") == []                   # ids are case-sensitive
        assert resolve_run_id(reader, "r0010", "home") == "r0010-c"     # the short form, not r00100-...
        with pytest.raises(UsageError, match="ambiguous"):
            resolve_run_id(reader, "r00", "home")
        with pytest.raises(UsageError, match="no run"):
            resolve_run_id(reader, "x", "home")


def test_a_runs_rows_through_named_queries(store, tmp_path):
    _run(store, "r1")
    for seq, status, score in ((2, "error", None), (1, "scored", 41.5)):
        store.insert("submissions", {"run_id": "r1", "seq": seq, "path": "models/m", "received_at": float(seq),
                                     "status": status, "score": score, "metrics": {"acc": score}})
    store.insert("attempts", {"run_id": "r1", "number": 1, "state": "exited", "executor": "local", "exit_code": 3})
    store.insert("attempts", {"run_id": "r1", "number": 2, "state": "exited", "executor": "local", "exit_code": 0})
    store.append_resource("r1", cpu_percent=50.0, rss_bytes=1, n_procs=1)
    store.append_resource("r1", cpu_percent=150.0, rss_bytes=1, n_procs=1, load=(3.5, 2.25, 1.0))
    for i in range(3):
        store.append_event("r1", "stdout", f"line {i}")
    store.append_event("r1", "stderr", "noise")
    store.flush()
    with StoreReader.open(tmp_path / "store.db") as reader:
        subs = reader.submissions("r1")
        assert [(s.seq, s.status, s.score, s.metrics) for s in subs] == [(1, "scored", 41.5, {"acc": 41.5}),
                                                                          (2, "error", None, {"acc": None})]
        assert reader.last_exit_code("r1") == 0 and reader.last_exit_code("r2") is None
        usage = reader.cpu_usage("r1")
        assert (usage.mean_percent, usage.samples) == (100.0, 2)
        assert reader.cpu_usage("r2").mean_percent is None
        assert reader.output_lines("r1") == ["line 0", "line 1", "line 2"]
        assert reader.output_lines("r1", "stderr") == ["noise"]
        exported = reader.export_run("r1")
        assert exported["submissions"][0]["score"] == 41.5
        # the host's load average beside each resource sample (none recorded with the first)
        assert [(r["cpu_percent"], r["load1"], r["load5"], r["load15"]) for r in exported["resources"]] == \
            [(50.0, None, None, None), (150.0, 3.5, 2.25, 1.0)]
        assert set(exported["resources"][0]) == {"ts", "cpu_percent", "rss_bytes", "n_procs", "gpus", "load1",
                                                 "load5", "load15"}
        with pytest.raises(KeyError):
            reader.export_run("r2")


def test_the_reader_is_read_only_and_the_writers_reader_sees_its_commits(store, tmp_path):
    reader = StoreReader.open(tmp_path / "store.db")
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader._rows("INSERT INTO plans (id, name, created_at) VALUES ('p', 'p', 0)", ())
    reader.close()
    _run(store, "r1", state="queued")
    store.update("runs", "r1", {"state": "running"})
    assert StoreReader.over(store).run("r1").state == "running"
    with pytest.raises(StoreError, match="no store"):
        StoreReader.open(tmp_path / "missing.db")


def test_an_imported_run_is_written_whole_once(store, tmp_path):
    run = {"id": "ab-x", "task": "arith", "agent": "a", "model": "m", "budget_s": 10.0, "state": "done",
           "created_at": 1.0, "spec": {"imported": {}}, "imported_from": "/x"}
    subs = [{"run_id": "ab-x", "seq": 1, "path": "p", "received_at": 1.0, "status": "scored", "score": 10.0},
            {"run_id": "ab-x", "seq": 2, "path": "p", "received_at": 2.0, "status": "scored", "score": 30.0}]
    events = [(1.0, "stdout", "info", "hello", None)]
    revision = {"files": {"train.py": b"print(1)\n"}, "skipped": [], "ts": 2.0}
    assert write_imported_run(store, run, subs, events, revision) is True
    assert write_imported_run(store, {**run, "agent": "changed"}, subs, events, revision) is False
    reader = StoreReader.over(store)
    stored = reader.run("ab-x")
    assert stored.agent == "a" and stored.imported_from == "/x"
    best = next(s for s in reader.submissions("ab-x") if s.seq == 2)
    assert stored.best_submission_id == best.id
    assert reader.output_lines("ab-x") == ["hello"]
    assert "+print(1)" in reader.revision_diff("ab-x", 1)

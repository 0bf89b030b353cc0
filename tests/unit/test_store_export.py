"""A run's export reads the run and its submissions as typed records (RunRecord, SubmissionRecord)
and writes what the store holds: the same JSON as the stored rows, decoded (store/export.py)."""

import json

from autorl_tui.store import Store
from autorl_tui.store.db import decode_row
from autorl_tui.store.queries import StoreReader
from autorl_tui.store.records import RunRecord
from autorl_tui.store.run_spec import RunSpec


def _stored(store: Store, table: str, sql: str, params) -> list[dict]:
    return [decode_row(table, dict(r)) for r in store.query(sql, params)]


def test_the_export_of_a_run_is_its_stored_rows_decoded(tmp_path):
    store = Store(tmp_path / "store.db")
    spec = RunSpec(task={"id": "arith", "dir": "/t"}, agent={"name": "ref"}, model="tiny", model_name="tiny",
                   executor="local", options={"limits": {"cpu": 2}}, protocol={"max_tokens": 64},
                   isolation="bwrap", data_origin={"kind": "generated"}, extra={"later_key": [1, 2]})
    store.add_run(RunRecord(id="r0001-a", task="arith", agent="ref", model="tiny", budget_s=60.0, state="done",
                            created_at=10.0, started_at=11.0, ended_at=70.5, baseline_score=19.0, test_score=63.25,
                            improvement=44.25, spec=spec))
    # A spec written by hand, keys in its own order, one this version does not know, one null.
    store.insert("runs", {"id": "r0002-b", "task": "gsm8k", "agent": "a", "model": "m", "budget_s": 5.0,
                          "state": "failed", "created_at": 20.0,
                          "spec": {"protocol_name": "zero-shot", "seed": 3, "unknown": {"x": 1}, "driver": None}})
    sub_ids = [store.insert("submissions", {"run_id": "r0001-a", "seq": seq, "path": f"output/v{seq}",
                                            "received_at": 20.0 + seq, "status": status, "score": score,
                                            "metrics": metrics, "snapshot_path": f"/s/{seq:03d}"})
               for seq, status, score, metrics in ((1, "scored", 41.5, {"accuracy": 41.5, "context": {"limit": 256}}),
                                                   (2, "error", None, None))]
    store.add_samples([{"run_id": "r0001-a", "submission_id": sub_ids[0], "split": "dev", "sample_id": str(i),
                        "prompt": "p", "output": "o", "correct": i % 2, "score": float(i % 2),
                        "failure_kind": None if i % 2 else "prompt_too_long", "error": None if i % 2 else "why",
                        "data": {"i": i}} for i in range(3)])
    bid = store.add_baseline({"task": "arith", "model": "tiny@x", "protocol_hash": "h", "grader_version": "3",
                              "split": "dev", "score": 19.0, "metrics": {"n": 40}, "created_at": 12.0})
    store.append_event("r0001-a", "harness", "baseline", data={"baseline_id": bid})
    store.flush()

    with StoreReader.open(tmp_path / "store.db") as reader:
        out = reader.export_run("r0001-a")
        other = reader.export_run("r0002-b")
    [run] = _stored(store, "runs", "SELECT * FROM runs WHERE id=?", ("r0001-a",))
    subs = _stored(store, "submissions", "SELECT * FROM submissions WHERE run_id=? ORDER BY seq", ("r0001-a",))
    samples = _stored(store, "samples", "SELECT * FROM samples WHERE submission_id=? ORDER BY split, id", (sub_ids[0],))
    # The same JSON text as the rows decoded (key order included) for a spec the engine wrote.
    assert json.dumps(out["run"]) == json.dumps(run)
    assert json.dumps([{k: v for k, v in s.items() if k != "samples"} for s in out["submissions"]]) == json.dumps(subs)
    assert out["submissions"][0]["samples"] == samples and out["submissions"][1]["samples"] == []
    assert out["run"]["spec"]["later_key"] == [1, 2] and out["submissions"][0]["metrics"]["context"] == {"limit": 256}
    assert (out["wall_time_s"], out["agent_time_s"], out["test_score"], out["isolation"]) == (60.5, 59.5, 63.25, "bwrap")
    assert [b["id"] for b in out["baselines"]] == [bid] and out["baselines"][0]["metrics"] == {"n": 40}
    # A hand-written spec: the same values (RunSpec's key order), its unknown key kept, its null kept.
    [raw] = _stored(store, "runs", "SELECT * FROM runs WHERE id=?", ("r0002-b",))
    assert other["run"] == raw and other["run"]["spec"]["unknown"] == {"x": 1} and other["protocol"] == "zero-shot"
    assert other["wall_time_s"] is None and other["submissions"] == []
    store.close()

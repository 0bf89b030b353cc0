"""The engine's named store methods (store/run_state.py) on a real SQLite store: numbering, the
rules that pick rows (cap, selection, duplicates, GPU holders) and the rows' shapes."""

from autorl_tui.store import Store
from autorl_tui.store.engine_records import GpuHolder, LogVolume
from autorl_tui.store.records import SubmissionRecord


def _run(store: Store, run_id: str, state: str = "queued", **fields) -> None:
    store.add_run({"id": run_id, "task": "arith", "agent": "a", "model": "m", "budget_s": 60.0, "state": state,
                   "created_at": fields.pop("created_at", 1.0), "spec": {"k": [1]}, **fields})


def test_submissions_are_numbered_per_run_and_only_live_ones_count_against_the_cap(tmp_path):
    s = Store(tmp_path / "s.db")
    ids = [s.add_submission("r1", 1, f"output/v{i}", received_at=100.0 + i) for i in range(4)]
    assert [seq for _, seq in ids] == [1, 2, 3, 4]
    assert s.add_submission("r2", 1, "output/x", received_at=5.0)[1] == 1      # another run starts at 1
    s.update_submission(ids[1][0], {"status": "rejected"})
    row = s.update_submission(ids[2][0], {"status": "duplicate", "metrics": {"acc": 0.5}})
    assert isinstance(row, SubmissionRecord)                                     # the table's one typed row
    assert row.status == "duplicate" and row.metrics == {"acc": 0.5}           # returned as stored, decoded
    assert s.submission(ids[2][0]) == row and s.submission(999) is None
    assert [r.status for r in s.submissions("r1")] == ["received", "rejected", "duplicate", "received"]
    assert [r.seq for r in s.interrupted_submissions("r1")] == [1, 4]
    assert s.capped_submission_times("r1") == [100.0, 103.0]
    s.close()


def test_the_selected_submission_is_the_best_dev_score_and_the_earliest_among_equals(tmp_path):
    s = Store(tmp_path / "s.db")
    subs = [s.add_submission("r1", 1, f"output/v{i}", received_at=float(i))[0] for i in range(4)]
    for sub_id, score in zip(subs, (40.0, 70.0, 70.0, None)):
        s.update_submission(sub_id, {"status": "scored" if score is not None else "error", "score": score,
                                     "content_hash": "h" if score == 70.0 else None})
    best = s.best_submission("r1")
    assert best is not None and best.id == subs[1] and best.seq == 2
    assert getattr(s.scored_with_content("r1", "h", exclude_id=subs[1]), "id", None) == subs[2]
    assert getattr(s.scored_with_content("r1", "h", exclude_id=subs[2]), "id", None) == subs[1]
    assert s.best_submission("r2") is None
    assert [r["seq"] for r in s.submission_summaries("r1")] == [1, 2, 3, 4]
    s.close()


def test_queue_order_and_positions(tmp_path):
    s = Store(tmp_path / "s.db")
    _run(s, "r1", queue_pos=1, priority=0)
    _run(s, "r2", queue_pos=2, priority=5)
    _run(s, "r3", queue_pos=3, priority=0, state="running")
    assert [q.run_id for q in s.queued_runs()] == ["r2", "r1"]
    assert s.last_queue_pos() == 3 and s.first_queued_pos() == 1
    s.set_run_fields("r1", {"queue_pos": s.first_queued_pos() - 1, "priority": 5})
    assert [q.run_id for q in s.queued_runs()] == ["r1", "r2"]
    assert s.run("r1")["spec"] == {"k": [1]} and s.count_runs() == 3
    assert [r["id"] for r in s.runs(["running"])] == ["r3"]
    s.close()


def test_gpu_holders_are_the_current_attempts_of_active_runs(tmp_path):
    s = Store(tmp_path / "s.db")
    _run(s, "r1", state="running", current_attempt=2)
    _run(s, "r2", state="done", current_attempt=1)
    s.add_attempt({"run_id": "r1", "number": 1, "state": "killed", "executor": "local", "gpus": ["0"]})
    s.add_attempt({"run_id": "r1", "number": 2, "state": "running", "executor": "local", "gpus": ["1", 2]})
    s.add_attempt({"run_id": "r2", "number": 1, "state": "exited", "executor": "local", "gpus": ["3"]})
    assert s.gpu_holders(["running", "paused"]) == [GpuHolder("r1", ["1", "2"])]
    assert s.latest_attempt("r1")["gpus"] == ["1", 2]
    s.close()


def test_revisions_are_numbered_and_the_last_manifest_comes_back(tmp_path):
    s = Store(tmp_path / "s.db")
    assert s.last_revision_manifest("r1") is None and s.last_revision_id("r1") is None
    first = s.add_revision("r1", ts=1.0, reason="change", manifest={"a.py": "x"}, total_bytes=3, skipped=[])
    second = s.add_revision("r1", ts=2.0, reason="final", manifest={"a.py": "y", "b.py": "z"}, total_bytes=5,
                            skipped=["big.bin"])
    assert (first[1], second[1]) == (1, 2)
    assert s.last_revision_manifest("r1") == {"a.py": "y", "b.py": "z"} and s.last_revision_id("r1") == second[0]
    assert [(r["seq"], r["n_files"]) for r in s.revision_list("r1")] == [(1, 1), (2, 2)]
    s.close()


def test_log_volume_counts_only_the_agent_output_events(tmp_path):
    s = Store(tmp_path / "s.db")
    s.append_event("r1", "stdout", "abc")
    s.append_event("r1", "action", "de", data={"k": 1})
    s.append_event("r1", "harness", "not counted")
    s.flush()
    assert s.log_volume("r1") == LogVolume(events=2, bytes=3 + 2 + len('{"k": 1}'))
    assert [e["message"] for e in s.events_tail("r1", 2)] == ["de", "not counted"]
    assert s.events_tail("r1", 2)[0]["data"] == {"k": 1} and s.count_events("r1") == 3
    s.close()

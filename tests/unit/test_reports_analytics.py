"""The analytics layer over real stores written through the Store API (the engine's writer).
Every figure is recomputed here straight from SQLite (sqlite3), independent of DuckDB."""

import hashlib
import math
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
import zlib

import pytest

from autorl_tui.exitcodes import UsageError
from autorl_tui.reports.analytics import Analytics
from autorl_tui.store.db import Store
from tests.support.run_writer import RunShape, write_run


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    path = tmp_path_factory.mktemp("analytics") / "store.db"
    store = Store(path)
    ids = {
        "risky": write_run(store, RunShape("r-risky", dangers=("kl_spike", "nan", "entropy_collapse", "length_blowup"),
                                           metric_steps=80)),
        "clean": write_run(store, RunShape("r-clean", scores=[24.0, 27.0, 33.0], drops=[], start=1_790_100_000.0)),
    }
    store.close()
    return path, ids


@pytest.fixture(scope="module")
def store_path(built):
    return built[0]


@pytest.fixture(scope="module")
def ids(built):
    return built[1]


@pytest.fixture(scope="module")
def a(store_path):
    with Analytics(store_path, max_points=25) as analytics:
        yield analytics


def sql(path, q, params=()):
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(q, params)]
    finally:
        conn.close()


def test_run_summary_matches_store_rows(a, store_path):
    run = a.run("r-risky")
    row = sql(store_path, "SELECT * FROM runs WHERE id = 'r-risky'")[0]
    for col in ("baseline_score", "best_dev_score", "test_score", "improvement", "state", "budget_s", "seed"):
        assert run[col] == row[col]
    subs = sql(store_path, "SELECT * FROM submissions WHERE run_id = 'r-risky' ORDER BY seq")
    assert run["n_submissions"] == len(subs)
    assert run["n_scored"] == sum(s["status"] == "scored" for s in subs)
    first_valid = min(s["received_at"] for s in subs if s["status"] == "scored")
    assert run["time_to_first_valid_s"] == pytest.approx(first_valid - row["started_at"])
    best = next(s for s in subs if s["id"] == row["best_submission_id"])
    assert run["time_to_best_s"] == pytest.approx(best["received_at"] - row["started_at"])
    assert run["spec"]["task"]["id"] == "arith"


def test_unknown_run_is_a_usage_error_naming_known_runs(a):
    with pytest.raises(UsageError, match="no run 'nope'.*recent runs: .*r-"):
        a.run("nope")


def test_missing_store_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="no store at"):
        Analytics(tmp_path / "absent.db")


def test_every_unscored_submission_is_in_the_drops_manifest_with_a_reason(a, store_path):
    drops = a.drops("r-risky")
    unscored = sql(store_path, "SELECT id, status, error FROM submissions WHERE run_id = 'r-risky' AND status <> 'scored'")
    assert {d["submission_id"] for d in drops} == {s["id"] for s in unscored}
    kinds = {d["drop_kind"] for d in drops}
    assert kinds == {"rejected", "error", "timed_out", "duplicate"}
    assert all(d["reason"] for d in drops)
    dup = next(d for d in drops if d["drop_kind"] == "duplicate")
    assert dup["reason"].startswith("same content as submission #1")
    assert a.drops("r-clean") == []


def test_metric_series_downsampled_buckets_agree_with_raw_points(a, store_path):
    series = {s["name"]: s for s in a.metric_series("r-risky", max_points=25)}
    raw = sql(store_path, "SELECT value FROM metrics WHERE run_id = 'r-risky' AND name = 'kl' ORDER BY ts, id")
    kl = series["kl"]
    assert kl["n_points"] == len(raw) == sum(p["n"] for p in kl["points"])
    assert len(kl["points"]) <= 25 and kl["downsampled"]
    # bucket means are the means of equal shares of the raw points, in time order
    values = [r["value"] for r in raw]
    start = 0
    for p in kl["points"]:
        chunk = values[start:start + p["n"]]
        start += p["n"]
        assert p["mean"] == pytest.approx(statistics.fmean(chunk))
        assert p["max"] == pytest.approx(max(chunk))
    # NaN is stored as NULL by SQLite and counted, never averaged
    loss = series["loss"]
    n_null = sql(store_path, "SELECT count(*) n FROM metrics WHERE run_id = 'r-risky' AND name = 'loss' AND value IS NULL")[0]["n"]
    assert loss["n_nan"] == n_null == 1
    assert all(p["mean"] is None or math.isfinite(p["mean"]) for p in loss["points"])


def test_danger_signals_flag_the_risky_run_and_pass_the_clean_one(a):
    risky = {c["signal"]: c for c in a.danger_signals("r-risky")}
    assert risky["kl_spike"]["status"] == "flagged"
    assert risky["kl_spike"]["evidence"][0]["max"] == pytest.approx(2.5)
    assert risky["entropy_collapse"]["status"] == "flagged"
    assert risky["length_blowup"]["status"] == "flagged"
    assert risky["non_finite"]["status"] == "flagged"
    assert risky["non_finite"]["evidence"][0]["series"] == "loss"
    # scores 24 -> 31 -> 29 while the synthetic reward keeps rising
    assert risky["reward_up_dev_down"]["status"] == "flagged"
    assert risky["reward_up_dev_down"]["evidence"][0]["score_to"] == 29.0
    clean = {c["signal"]: c for c in a.danger_signals("r-clean")}
    assert {c["status"] for c in clean.values()} == {"ok"}


def test_phases_cover_the_run_and_grading_counts_as_evaluate(a, store_path):
    p = a.phases("r-clean")
    run = sql(store_path, "SELECT started_at, ended_at FROM runs WHERE id = 'r-clean'")[0]
    agent_end = sql(store_path, "SELECT max(ended_at) e FROM attempts WHERE run_id = 'r-clean'")[0]["e"]
    assert agent_end < run["ended_at"]  # the agent's time ends before the harness finalizes
    span = agent_end - run["started_at"]
    assert sum(p["totals_s"].values()) == pytest.approx(span)
    grading = sum(s["graded_at"] - s["received_at"]
                  for s in sql(store_path, "SELECT * FROM submissions WHERE run_id = 'r-clean'"))
    # each grading interval is rounded out to whole buckets
    assert grading <= p["totals_s"]["evaluate"] <= grading + 2 * 3 * p["bucket_s"]
    assert p["totals_s"]["train"] > 0 and p["totals_s"]["write_code"] > 0 and p["totals_s"]["explore"] > 0
    # segments tile the span in order
    assert p["segments"][0]["start_s"] == 0
    for x, y in zip(p["segments"], p["segments"][1:]):
        assert x["end_s"] == pytest.approx(y["start_s"]) and x["phase"] != y["phase"]


def test_phases_mark_long_silences_idle(tmp_path):
    store = Store(tmp_path / "s.db")
    write_run(store, RunShape("r-idle", scores=[25.0], drops=[], duration_s=2000))
    # ten minutes of silence after the last event: the agent (and the run) end late
    store.update("runs", "r-idle", {"ended_at": 1_790_000_000.0 + 2000 + 600})
    store.update("attempts", "r-idle", {"ended_at": 1_790_000_000.0 + 2000 + 600}, key_column="run_id")
    store.close()
    with Analytics(tmp_path / "s.db") as a:
        p = a.phases("r-idle", idle_gap_s=120)
    assert p["segments"][-1]["phase"] == "idle"
    assert p["totals_s"]["idle"] >= 600 - 120 - 2 * p["bucket_s"]


def test_badcases_and_failure_taxonomy_match_samples(a, store_path, ids):
    sid = ids["risky"]["best_submission_id"]
    counts = {c["kind"]: c["n"] for c in a.failure_counts(sid)}
    raw = sql(store_path, "SELECT correct, failure_kind FROM samples WHERE submission_id = ?", (sid,))
    assert counts.get("correct", 0) == sum(r["correct"] == 1 for r in raw)
    for kind in {r["failure_kind"] for r in raw if r["failure_kind"]}:
        assert counts[kind] == sum(r["failure_kind"] == kind for r in raw)
    examples = a.badcases(sid, per_kind=2)
    assert all(e["failure_kind"] != "correct" for e in examples)
    assert max(sum(e["failure_kind"] == k for e in examples) for k in counts if k != "correct") <= 2
    vs = a.versus_baseline(sid, ids["risky"]["baseline_id"])
    base = {r["sample_id"]: r["correct"] for r in sql(store_path, "SELECT sample_id, correct FROM samples WHERE baseline_id = ?",
                                                           (ids["risky"]["baseline_id"],))}
    now = {r["sample_id"]: r["correct"] for r in sql(store_path, "SELECT sample_id, correct FROM samples WHERE submission_id = ?", (sid,))}
    assert vs["fixed"] == sum(1 for k in now if base[k] == 0 and now[k] == 1)
    assert vs["broken"] == sum(1 for k in now if base[k] == 1 and now[k] == 0)


def test_badcases_count_the_dev_split_only(tmp_path):
    """The selected submission also holds the held-out test split's samples; the badcases section
    reports the dev split (what the submission was scored on, and what the baseline comparison uses)."""
    store = Store(tmp_path / "s.db")
    sid = write_run(store, RunShape("r-split", scores=[25.0], drops=[]))["best_submission_id"]
    dev = store.query("SELECT * FROM samples WHERE submission_id = ?", (sid,))
    store.insert_many("samples", [{**{k: v for k, v in r.items() if k != "id"}, "split": "test", "correct": 0,
                                   "score": 0.0, "failure_kind": "no_answer", "sample_id": "test-" + r["sample_id"]}
                                  for r in dev])
    store.close()
    with Analytics(tmp_path / "s.db") as a:
        counts = {c["kind"]: c["n"] for c in a.failure_counts(sid)}
        assert sum(counts.values()) == len(dev)
        assert counts.get("correct", 0) == sum(r["correct"] == 1 for r in dev)
        assert {c["kind"]: c["n"] for c in a.failure_counts(sid, split="test")} == {"no_answer": len(dev)}
        assert not any(e["sample_id"].startswith("test-") for e in a.badcases(sid, per_kind=50))


def test_action_log_is_capped_per_category_with_true_counts(a, store_path):
    counts = {c["category"]: c["n"] for c in a.event_counts("r-risky")}
    raw = sql(store_path, "SELECT kind, data FROM events WHERE run_id = 'r-risky'")
    assert counts["stdout"] == sum(r["kind"] == "stdout" for r in raw)
    assert counts["action:shell"] == sum(r["kind"] == "action" and '"shell"' in (r["data"] or "") for r in raw)
    log = a.action_log("r-risky", head=5, tail=3)
    stdout = [e for e in log if e["category"] == "stdout"]
    assert len(stdout) == 8 and stdout[0]["rn"] == 1 and stdout[-1]["rn"] == counts["stdout"]


def test_cost_integrates_resource_samples(a, store_path):
    cost = a.cost("r-risky")
    rows = sql(store_path, "SELECT ts, cpu_percent FROM resources WHERE run_id = 'r-risky' ORDER BY ts, id")
    cpu_s = sum(r["cpu_percent"] / 100 * min(n["ts"] - r["ts"], 60) for r, n in zip(rows, rows[1:]))
    assert cost["cpu_hours"] == pytest.approx(cpu_s / 3600)
    assert cost["tokens_in"] == 120_000 and cost["resource_samples"] == len(rows)


def test_revisions_and_blobs_round_trip(a, store_path):
    revs = a.revisions("r-risky")
    assert [r["seq"] for r in revs] == list(range(1, len(revs) + 1))
    sha = revs[-1]["manifest"]["train.py"]
    row = sql(store_path, "SELECT encoding, content FROM blobs WHERE sha256 = ?", (sha,))[0]
    expected = zlib.decompress(row["content"]) if row["encoding"] == "zlib" else row["content"]
    assert a.blob(sha) == expected and expected.startswith(b"import json")
    assert hashlib.sha256(a.blob(sha)).hexdigest() == sha
    assert a.blob("0" * 64) is None


WRITER = """
import sys, time
from autorl_tui.store.db import Store
store = Store(sys.argv[1], flush_rows=10)
print("ready", flush=True)
t0, worst, i = time.time(), 0.0, 0
while time.time() - t0 < float(sys.argv[2]):
    t = time.perf_counter()
    store.append_event("r-live", "stdout", f"line {i}")
    store.append_metric("r-live", "loss", 1.0 / (i + 1), step=i, source="metrics_jsonl")
    store.flush()
    worst = max(worst, time.perf_counter() - t)
    i += 1
store.close()
print(f"{i} {worst}", flush=True)
"""


@pytest.mark.subprocess
def test_reads_a_store_the_engine_is_writing_without_blocking_it(tmp_path):
    """The engine (another process) keeps committing while a report reads: its commits never wait
    on the reader, every query sees the newest committed rows, and the file stays intact."""
    path = tmp_path / "live.db"
    store = Store(path)
    write_run(store, RunShape("r-live", scores=[22.0], drops=[]))
    store.close()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), "4"], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        assert writer.stdout.readline().strip() == "ready"
        with Analytics(path) as a:
            assert a.snapshot is None  # another process writes: read the live file
            seen = []
            deadline = time.time() + 3
            while time.time() < deadline:
                seen.append(next(c["n"] for c in a.event_counts("r-live") if c["category"] == "stdout"))
                a.metric_series("r-live")
                a.phases("r-live")
        rows, worst = writer.communicate(timeout=30)[0].split()
    finally:
        writer.kill()
    assert writer.returncode == 0
    assert seen == sorted(seen) and seen[-1] > seen[0]      # fresh rows, never going back
    assert float(worst) < 1.0                               # the writer was never held up for long
    assert int(rows) > 0
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_in_process_writer_makes_analytics_read_a_snapshot(tmp_path):
    """Two SQLite libraries must not share a live file in one process: with the Store open here,
    Analytics reads a backup copy, and the writer keeps working."""
    path = tmp_path / "inproc.db"
    store = Store(path)
    write_run(store, RunShape("r-in", scores=[22.0], drops=[]))
    with Analytics(path) as a:
        assert a.snapshot is not None and a.snapshot != path
        n = a.run("r-in")["n_submissions"]
        store.append_event("r-in", "stdout", "still writing")
        store.flush()
        assert n == 1
    assert store.one("PRAGMA integrity_check")["integrity_check"] == "ok"
    store.close()


def test_phase_heuristic_on_a_scripted_timeline(tmp_path):
    """Actions shaped like the stream parsers' output at known times give known phases."""
    t0 = 1_790_000_000.0
    store = Store(tmp_path / "p.db")
    store.insert("runs", {"id": "r-p", "task": "arith", "agent": "claude-code", "model": "tiny", "budget_s": 1200,
                          "state": "done", "created_at": t0 - 10, "started_at": t0, "ended_at": t0 + 1000, "spec": {}})
    ev = store.append_event
    ev("r-p", "action", "Bash: ls", data={"kind": "tool_call", "name": "Bash", "input": {"command": "ls"}}, ts=t0)
    ev("r-p", "action", "ls", data={"kind": "shell", "command": "ls", "exit_code": 0}, ts=t0 + 1)
    ev("r-p", "action", "edit code/train.py", data={"kind": "file_edit", "path": "code/train.py"}, ts=t0 + 100)
    ev("r-p", "action", "Bash", data={"kind": "tool_call", "name": "Bash",
                                      "input": {"command": "accelerate launch code/train.py"}}, ts=t0 + 200)
    for k in range(11):  # training output every 30 s until t=500
        ev("r-p", "stdout", f"step {k}", ts=t0 + 200 + 30 * k)
    ev("r-p", "action", "usage", data={"kind": "usage", "usage": {"tokens_in": 5}}, ts=t0 + 700)  # not activity
    store.insert("submissions", {"run_id": "r-p", "seq": 1, "path": "output/m", "received_at": t0 + 800,
                                 "graded_at": t0 + 900, "status": "scored", "score": 30.0})
    store.close()
    with Analytics(tmp_path / "p.db") as a:
        p = a.phases("r-p", idle_gap_s=120)
    assert p["bucket_s"] == 1.0
    # the edit at t=100 is one second of writing code; the 99 s after it, with no signal, are
    # exploring (not more writing: a file written in a second is not shown as a minute and a half)
    expected = {"explore": 199, "write_code": 1, "train": 420, "evaluate": 101, "idle": 279}
    for phase, seconds in expected.items():
        assert p["totals_s"][phase] == pytest.approx(seconds, abs=3), phase
    assert [s["phase"] for s in p["segments"]] == ["explore", "write_code", "explore", "train", "idle", "evaluate",
                                                   "idle"]


def test_budget_used_counts_the_agents_time_not_the_harness_grading_after_it(tmp_path):
    t0 = 1_790_000_000.0
    store = Store(tmp_path / "b.db")
    store.insert("runs", {"id": "r-b", "task": "arith", "agent": "reference", "model": "tiny", "budget_s": 300,
                          "state": "done", "created_at": t0 - 60, "started_at": t0, "ended_at": t0 + 321, "spec": {}})
    store.insert("attempts", {"run_id": "r-b", "number": 1, "state": "exited", "executor": "local",
                              "started_at": t0, "ended_at": t0 + 300})     # the agent stops at its deadline
    store.close()                                                          # then the held-out test is graded
    with Analytics(tmp_path / "b.db") as a:
        cost = a.cost("r-b")
    assert cost["agent_s"] == pytest.approx(300) and cost["budget_used"] == pytest.approx(1.0)
    assert cost["wall_s"] == pytest.approx(321)                            # the run's wall time still shown


def test_reads_a_store_written_before_dev_baselines_sessions_and_imports(tmp_path):
    """sql/compat.sql fills in what an old store lacks: a schema-1 store, from before its runs had
    dev baselines, reads like a current one."""
    from autorl_tui.store.schema import MIGRATIONS

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(MIGRATIONS[0])
    conn.execute("PRAGMA user_version = 1")
    conn.execute("ALTER TABLE runs DROP COLUMN baseline_dev_score")
    conn.execute("ALTER TABLE runs DROP COLUMN dev_improvement")
    conn.execute("INSERT INTO runs (id, task, agent, model, budget_s, state, created_at, started_at, ended_at, "
                 "baseline_score, best_dev_score, spec) VALUES ('r0001-old', 't', 'a', 'm', 60, 'done', 100, 101, 160, "
                 "20.0, 35.0, '{}')")
    conn.execute("INSERT INTO metrics (run_id, ts, step, name, value, source) VALUES ('r0001-old', 110, 1, 'loss', 2.0, 'stdout')")
    conn.commit()
    conn.close()
    with Analytics(path) as old:
        run = old.run(old.resolve_run_id("r0001"))
        assert (run["baseline_dev_score"], run["dev_improvement"], run["imported_from"]) == (20.0, 15.0, None)
        assert old.training_sessions("r0001-old") == []
        assert [r["session_id"] for r in old.sql("SELECT session_id FROM metrics_v")] == [None]


def test_a_training_command_announced_on_stdout_is_training_not_exploring(tmp_path):
    """A scripted pipeline prints what it starts (`running python code/sft.py --steps 800`) and has
    no tool calls: its SFT start-up was shown as exploring."""
    t0 = 1_790_000_000.0
    store = Store(tmp_path / "s.db")
    store.insert("runs", {"id": "r-s", "task": "arith", "agent": "reference", "model": "tiny", "budget_s": 300,
                          "state": "done", "created_at": t0 - 10, "started_at": t0, "ended_at": t0 + 100, "spec": {}})
    store.append_event("r-s", "stdout", "reading the task", ts=t0 + 1)
    store.append_event("r-s", "stdout", "running /venv/bin/python code/sft.py --data data/train.jsonl --steps 800",
                       ts=t0 + 10)
    for k in range(6):      # the trainer's model loading, then its first lines, before any metric
        store.append_event("r-s", "stdout", f"loading {k}", ts=t0 + 20 + 10 * k)
    store.close()
    with Analytics(tmp_path / "s.db") as a:
        p = a.phases("r-s", idle_gap_s=120)
    assert [s["phase"] for s in p["segments"]] == ["explore", "train"]
    assert p["totals_s"]["train"] == pytest.approx(90, abs=3)

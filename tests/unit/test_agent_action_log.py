"""Actions from a trace into a real SQLite store: events and the run's token/cost totals."""

import time
from pathlib import Path

from autorl_tui.instrument.action_log import ActionRecorder
from autorl_tui.store.db import Store, decode_row

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"


def new_run(store: Store, run_id: str = "r0001-arith-claude-s0") -> str:
    store.insert("runs", {"id": run_id, "task": "arith", "agent": "claude-code", "model": "tiny",
                          "driver": "claude-sonnet-4-6", "budget_s": 600, "state": "running",
                          "created_at": time.time(), "spec": {}})
    return run_id


def test_recorder_stores_actions_and_run_totals(tmp_path):
    store = Store(tmp_path / "store.sqlite")
    run_id = new_run(store)
    rec = ActionRecorder(store, run_id, 1, "claude_stream_json")
    for line in (TRACES / "claude_stream_json.jsonl").read_text().splitlines():
        rec.feed(line)
    rec.finish()
    store.flush()
    rows = [decode_row("events", r) for r in store.query("SELECT * FROM events WHERE run_id = ? ORDER BY id", [run_id])]
    assert all(r["kind"] == "action" and r["attempt"] == 1 for r in rows)
    shells = [r for r in rows if r["data"]["kind"] == "shell"]
    assert [r["message"] for r in shells] == ["shell [exit 0]: ls data models",
                                              "shell [exit 2]: python code/missing.py",
                                              "shell [exit ?]: sleep 1000"]
    assert [r["level"] for r in rows if r["data"]["kind"] == "malformed"] == ["warning"]
    run = store.get("runs", run_id)
    assert (run["tokens_in"], run["tokens_out"], run["cost_usd"]) == (10070, 180, 0.0421)


def test_totals_continue_across_attempts_and_stay_null_without_cost(tmp_path):
    store = Store(tmp_path / "store.sqlite")
    run_id = new_run(store)
    first = ActionRecorder(store, run_id, 1, "codex_json")
    first.feed('{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":0,"output_tokens":7}}')
    assert first.flush_totals() == {"tokens_in": 100, "tokens_out": 7, "cost_usd": None}
    assert first.flush_totals() is None                          # nothing new: no write
    second = ActionRecorder(store, run_id, 2, "codex_json", totals=first.totals)
    second.feed('{"type":"turn.completed","usage":{"input_tokens":50,"output_tokens":3}}')
    second.finish()
    run = store.get("runs", run_id)
    assert (run["tokens_in"], run["tokens_out"], run["cost_usd"]) == (150, 10, None)

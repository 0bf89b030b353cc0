import sqlite3
import time

import pytest

from autorl_tui.store import Store
from autorl_tui.store.db import StoreError, open_readonly
from autorl_tui.store.schema import SCHEMA_VERSION


def test_migrates_a_new_store_and_is_idempotent(tmp_path):
    path = tmp_path / "s.db"
    s = Store(path)
    assert s.schema_version() == SCHEMA_VERSION
    tables = {r["name"] for r in s.query("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "attempts", "events", "metrics", "submissions", "samples", "revisions", "blobs", "resources",
            "baselines"} <= tables
    s.close()
    s2 = Store(path)   # re-opening does not re-run migrations
    assert s2.schema_version() == SCHEMA_VERSION
    assert s2.one("PRAGMA journal_mode")["journal_mode"] == "wal"
    s2.close()


def test_refuses_a_store_from_a_newer_version(tmp_path):
    path = tmp_path / "s.db"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer than this autorl-tui"):
        Store(path)


def test_buffered_rows_are_invisible_until_flushed_and_then_in_order(tmp_path):
    s = Store(tmp_path / "s.db", flush_rows=10_000)
    reader = open_readonly(tmp_path / "s.db")
    for i in range(100):
        s.append_event("r1", "stdout", f"line {i}")
    assert reader.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 0
    assert s.flush() == 100
    msgs = [r[0] for r in reader.execute("SELECT message FROM events ORDER BY id")]
    assert msgs == [f"line {i}" for i in range(100)]


def test_immediate_write_flushes_buffer_first(tmp_path):
    s = Store(tmp_path / "s.db")
    s.append_event("r1", "stdout", "before")
    s.insert("plans", {"id": "p1", "name": "x", "source": "", "created_at": time.time()})
    reader = open_readonly(tmp_path / "s.db")
    assert reader.execute("SELECT message FROM events").fetchone()[0] == "before"


def test_blobs_are_content_addressed_and_compressed(tmp_path):
    s = Store(tmp_path / "s.db")
    data = b"print('hello')\n" * 500
    d1 = s.put_blob(data)
    d2 = s.put_blob(data)
    assert d1 == d2
    assert s.one("SELECT COUNT(*) AS n FROM blobs")["n"] == 1
    row = s.one("SELECT encoding, length(content) AS n FROM blobs")
    assert row["encoding"] == "zlib" and row["n"] < len(data)
    assert s.get_blob(d1) == data


def test_json_columns_round_trip(tmp_path):
    s = Store(tmp_path / "s.db")
    s.insert("runs", {"id": "r1", "task": "t", "agent": "a", "model": "m", "budget_s": 1, "state": "queued",
                      "created_at": 0, "spec": {"task": {"id": "t"}, "n": [1, 2]}})
    assert s.get("runs", "r1")["spec"] == {"task": {"id": "t"}, "n": [1, 2]}

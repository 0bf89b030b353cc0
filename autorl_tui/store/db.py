"""The single writer.

Only the harness process writes the store. High-volume rows (events, metrics, resource samples)
are buffered and committed in batches; anything that changes state (a run's state, a submission's
status, an attempt starting) is committed immediately, after flushing the buffer so that the
order of rows on disk is the order things happened.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import urllib.parse
import zlib
from pathlib import Path
from typing import Any, Iterable

from autorl_tui.store.findings import FindingQueries
from autorl_tui.store.run_state import RunStateQueries
from autorl_tui.store.schema import MIGRATIONS, SCHEMA_VERSION

JSON_COLUMNS = {
    "runs": ("spec",),
    "attempts": ("gpus", "offsets"),
    "events": ("data",),
    "submissions": ("metrics",),
    "baselines": ("metrics",),
    "samples": ("data",),
    "revisions": ("manifest", "skipped"),
    "resources": ("gpus",),
    "training_sessions": ("sources",),
    "findings": ("evidence",),
}


EVENTS_INSERT = "INSERT INTO events (run_id, attempt, ts, kind, level, message, data) VALUES (?, ?, ?, ?, ?, ?, ?)"
# A batch of lines in one statement: the messages travel as one JSON array, SQLite unpacks it; no
# parameters bound per row in Python (which is most of executemany's cost for short rows).
LINES_INSERT = ("INSERT INTO events (run_id, attempt, ts, kind, level, message, data) "
                "SELECT ?, ?, ?, ?, ?, value, NULL FROM json_each(?) ORDER BY key")


class _Lines:
    """Buffered plain events of one kind, level and time (Store.append_lines): rows written at the
    flush, in their place among the other buffered events."""
    __slots__ = ("run_id", "attempt", "ts", "kind", "level", "messages")

    def __init__(self, run_id: str | None, attempt: int | None, ts: float, kind: str, level: str,
                 messages: list[str]):
        self.run_id, self.attempt, self.ts, self.kind, self.level, self.messages = (
            run_id, attempt, ts, kind, level, messages)

    def insert(self, conn: sqlite3.Connection) -> None:
        head = (self.run_id, self.attempt, self.ts, self.kind, self.level)
        payload = json.dumps(self.messages, ensure_ascii=False)
        if "\\u0000" in payload:      # json_each ends a string at a NUL: such a batch goes row by row
            conn.executemany(EVENTS_INSERT, [(*head, message, None) for message in self.messages])
        else:
            conn.execute(LINES_INSERT, (*head, payload))


def _dumps(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, default=str)


def decode_row(table: str, row: dict | None) -> dict | None:
    if row is None:
        return None
    for col in JSON_COLUMNS.get(table, ()):
        if isinstance(row.get(col), str):
            try:
                row[col] = json.loads(row[col])
            except ValueError:
                pass
    return row


class StoreError(Exception):
    pass


class Store(RunStateQueries, FindingQueries):
    """Read-write handle. Create one per process that owns the home (the engine). The engine's
    named queries and writes are its methods too (store/run_state.py)."""

    def __init__(self, path: str | os.PathLike, flush_rows: int = 2000):
        self.path = Path(path)
        new = not self.path.exists()
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None,
                                     timeout=30)
        self._conn.row_factory = sqlite3.Row
        if new:
            os.chmod(self.path, 0o600)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA foreign_keys=OFF")
        self._lock = threading.RLock()
        self._events: list[tuple | _Lines] = []   # rows, and batches of lines (append_lines)
        self._line_batches = 0                       # how many of those are batches of lines
        self._metrics: list[tuple] = []
        self._resources: list[tuple] = []
        self._sessions: list[tuple] = []
        self._next_id: dict[str, int] = {}
        self._staged: dict[tuple, dict] = {}
        self.flush_rows = flush_rows
        self.migrate()

    @property
    def db(self):
        """A sqlite-utils view of the same connection, for ad-hoc introspection (tables, counts).
        Imported lazily: sqlite-utils pulls in pandas when present, which costs a second at start."""
        import sqlite_utils

        return sqlite_utils.Database(self._conn)

    # ---------------------------------------------------------------- schema
    def schema_version(self) -> int:
        return self._conn.execute("PRAGMA user_version").fetchone()[0]

    def migrate(self) -> None:
        with self._lock:
            current = self.schema_version()
            if current > SCHEMA_VERSION:
                raise StoreError(
                    f"store {self.path} has schema version {current}, newer than this autorl-tui "
                    f"({SCHEMA_VERSION}); upgrade autorl-tui or use another --home")
            for version in range(current + 1, SCHEMA_VERSION + 1):
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    for statement in _split_sql(MIGRATIONS[version - 1]):
                        self._conn.execute(statement)
                    self._conn.execute(f"PRAGMA user_version = {version}")
                    self._conn.execute("COMMIT")
                except Exception:
                    self._conn.execute("ROLLBACK")
                    raise

    # ---------------------------------------------------------------- buffered appends
    def append_event(self, run_id: str | None, kind: str, message: str, *, level: str = "info",
                     data: Any = None, attempt: int | None = None, ts: float | None = None) -> None:
        with self._lock:
            self._events.append((run_id, attempt, ts or time.time(), kind, level, message, _dumps(data)))
            if len(self._events) >= self.flush_rows:
                self.flush()

    def append_lines(self, run_id: str | None, attempt: int | None, ts: float, kind: str, level: str,
                     messages: list[str]) -> None:
        """Many plain events of one kind, level and time at once (a batch of one stream's agent
        lines): kept as one entry, written by one statement at the flush (_Lines). No size-triggered
        flush here: the batch is bounded by its caller and commits whole, with what the caller
        stages after it (a tail's offsets), at the next flush, never in part before those offsets."""
        if messages:
            with self._lock:
                self._events.append(_Lines(run_id, attempt, ts, kind, level, messages))
                self._line_batches += 1

    def _allocate(self, table: str) -> int:
        """The next row id of a buffered table: ids are known before the commit, so a later
        staged update can name the row (this process is the only writer)."""
        if table not in self._next_id:
            self._next_id[table] = self._conn.execute(f"SELECT COALESCE(MAX(id), 0) FROM {table}").fetchone()[0] + 1
        rid = self._next_id[table]
        self._next_id[table] = rid + 1
        return rid

    def append_metric(self, run_id: str, name: str, value: float | None, *, step: int | None = None,
                      source: str, phase: str | None = None, attempt: int | None = None,
                      ts: float | None = None, session_id: int | None = None) -> int:
        """Buffers one point; returns its row id."""
        with self._lock:
            rid = self._allocate("metrics")
            self._metrics.append((rid, run_id, attempt, ts or time.time(), step, name, value, source, phase, session_id))
            if len(self._metrics) >= self.flush_rows:
                self.flush()
            return rid

    def append_session(self, run_id: str, *, attempt: int | None, kind: str, sources: list[str],
                       started_at: float) -> int:
        """Buffers a training session (committed with the points that follow it); returns its id."""
        with self._lock:
            rid = self._allocate("training_sessions")
            seq = self._next_id.setdefault(("seq", run_id), self._conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM training_sessions WHERE run_id = ?", (run_id,)).fetchone()[0] + 1)
            self._next_id[("seq", run_id)] = seq + 1
            self._sessions.append((rid, run_id, attempt, seq, kind, _dumps(sources), started_at))
            return rid

    def append_resource(self, run_id: str, *, cpu_percent: float | None, rss_bytes: int | None,
                        n_procs: int | None, gpus: Any = None, ts: float | None = None,
                        load: list[float] | tuple[float, ...] | None = None) -> None:
        """`load`: the host's load average over 1, 5 and 15 minutes when the sample was taken."""
        l1, l5, l15 = load if load else (None, None, None)
        with self._lock:
            self._resources.append((run_id, ts or time.time(), cpu_percent, rss_bytes, n_procs, _dumps(gpus),
                                    l1, l5, l15))

    def stage_update(self, table: str, where: dict, fields: dict) -> None:
        """An update committed in the same transaction as the rows buffered so far: e.g. a tail's
        byte offset lands together with the events read up to it, so a crash can never leave
        events recorded beyond the recorded offset (which would duplicate them on resume)."""
        with self._lock:
            key = (table, tuple(sorted(where.items())))
            self._staged.setdefault(key, {}).update(fields)

    def pending(self) -> int:
        return (len(self._events) + len(self._metrics) + len(self._resources) + len(self._sessions)
                + len(self._staged))

    def flush(self) -> int:
        """Commit buffered rows in one transaction. Returns how many rows were written."""
        with self._lock:
            n = self.pending()
            if not n:
                return 0
            events, metrics, resources, staged = self._events, self._metrics, self._resources, self._staged
            sessions, line_batches = self._sessions, self._line_batches
            self._events, self._metrics, self._resources, self._staged, self._sessions = [], [], [], {}, []
            self._line_batches = 0
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                if events:
                    self._write_events(events, line_batches)
                if sessions:
                    self._conn.executemany(
                        "INSERT INTO training_sessions (id, run_id, attempt, seq, kind, sources, started_at) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)", sessions)
                if metrics:
                    self._conn.executemany(
                        "INSERT INTO metrics (id, run_id, attempt, ts, step, name, value, source, phase, session_id) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", metrics)
                if resources:
                    self._conn.executemany(
                        "INSERT INTO resources (run_id, ts, cpu_percent, rss_bytes, n_procs, gpus, load1, load5, load15) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", resources)
                for (table, where), fields in staged.items():
                    self._conn.execute(*_update_sql(table, dict(where), fields))
                self._conn.execute("COMMIT")
            except Exception:
                self._conn.execute("ROLLBACK")
                self._events[:0], self._metrics[:0], self._resources[:0] = events, metrics, resources
                self._sessions[:0] = sessions
                self._line_batches += line_batches
                for key, fields in staged.items():
                    self._staged.setdefault(key, {}).update(fields)
                raise
            return n

    def _write_events(self, events: list, line_batches: int) -> None:
        """Buffered events in their order: runs of single rows by one executemany each, a batch of
        lines (_Lines) by its own statement."""
        if not line_batches:
            self._conn.executemany(EVENTS_INSERT, events)
            return
        start = 0
        for i, item in enumerate(events):
            if type(item) is _Lines:
                if start < i:
                    self._conn.executemany(EVENTS_INSERT, events[start:i])
                item.insert(self._conn)
                start = i + 1
        if start < len(events):
            self._conn.executemany(EVENTS_INSERT, events[start:] if start else events)

    # ---------------------------------------------------------------- immediate writes
    def insert(self, table: str, row: dict) -> int | str:
        """Insert one row and commit now (after flushing buffered rows). Returns its primary key."""
        with self._lock:
            self.flush()
            encoded = {k: (_dumps(v) if k in JSON_COLUMNS.get(table, ()) else v) for k, v in row.items()}
            cols = ", ".join(encoded)
            marks = ", ".join("?" for _ in encoded)
            cur = self._conn.execute(f"INSERT INTO {table} ({cols}) VALUES ({marks})", tuple(encoded.values()))
            return row.get("id", cur.lastrowid) if table in ("runs", "plans") else cur.lastrowid

    def update(self, table: str, key: Any, fields: dict, key_column: str = "id") -> None:
        self.update_where(table, {key_column: key}, fields)

    def update_where(self, table: str, where: dict, fields: dict) -> None:
        """Update and commit now (after flushing buffered rows)."""
        if not fields:
            return
        with self._lock:
            self.flush()
            self._conn.execute(*_update_sql(table, where, fields))

    def insert_many(self, table: str, rows: Iterable[dict]) -> int:
        rows = list(rows)
        if not rows:
            return 0
        with self._lock:
            self.flush()
            cols = list(rows[0])
            json_cols = JSON_COLUMNS.get(table, ())
            values = [tuple(_dumps(r.get(c)) if c in json_cols else r.get(c) for c in cols) for r in rows]
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(
                    f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})", values)
                self._conn.execute("COMMIT")
            except Exception:
                self._conn.execute("ROLLBACK")
                raise
            return len(rows)

    def write_atomically(self, statements: list[tuple[str, tuple]]) -> None:
        """Run the statements in one transaction (after flushing buffered rows): all or nothing."""
        with self._lock:
            self.flush()
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for sql, params in statements:
                    self._conn.execute(sql, params)
                self._conn.execute("COMMIT")
            except Exception:
                self._conn.execute("ROLLBACK")
                raise

    def put_blob(self, content: bytes) -> str:
        import hashlib

        digest = hashlib.sha256(content).hexdigest()
        with self._lock:
            if self._conn.execute("SELECT 1 FROM blobs WHERE sha256 = ?", (digest,)).fetchone():
                return digest
            packed = zlib.compress(content, 6)
            encoding, stored = ("zlib", packed) if len(packed) < len(content) else ("raw", content)
            self._conn.execute("INSERT OR IGNORE INTO blobs (sha256, size, encoding, content) VALUES (?, ?, ?, ?)",
                               (digest, len(content), encoding, stored))
        return digest

    # ---------------------------------------------------------------- reads
    def query(self, sql: str, params: Iterable = ()) -> list[dict]:
        with self._lock:
            return [dict(r) for r in self._conn.execute(sql, tuple(params)).fetchall()]

    def rows(self, table: str, sql: str, params: Iterable = ()) -> list[dict]:
        """query(), with the JSON columns of `table` decoded."""
        return [decode_row(table, r) for r in self.query(sql, params)]

    def one(self, sql: str, params: Iterable = ()) -> dict | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def get(self, table: str, key: Any, key_column: str = "id") -> dict | None:
        return decode_row(table, self.one(f"SELECT * FROM {table} WHERE {key_column} = ?", (key,)))

    def get_blob(self, digest: str) -> bytes | None:
        row = self.one("SELECT encoding, content FROM blobs WHERE sha256 = ?", (digest,))
        if row is None:
            return None
        return zlib.decompress(row["content"]) if row["encoding"] == "zlib" else bytes(row["content"])

    def close(self) -> None:
        """Flush, fold the WAL back into store.db and close: after this, store.db alone is the whole
        record (a copy of it needs no -wal file). A reader still open elsewhere can hold part of the
        WAL back; SQLite then finishes the checkpoint when the last connection closes."""
        with self._lock:
            try:
                self.flush()
                try:
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                except sqlite3.Error:
                    pass
            finally:
                self._conn.close()


def _update_sql(table: str, where: dict, fields: dict) -> tuple[str, tuple]:
    encoded = {k: (_dumps(v) if k in JSON_COLUMNS.get(table, ()) else v) for k, v in fields.items()}
    sets = ", ".join(f"{k} = ?" for k in encoded)
    cond = " AND ".join(f"{k} = ?" for k in where)
    return f"UPDATE {table} SET {sets} WHERE {cond}", (*encoded.values(), *where.values())


def _split_sql(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


def readonly_uri(path: str | os.PathLike) -> str:
    """The URI a reader opens the store with. In a folder it cannot write (a read-only mount, a
    shared results folder) SQLite cannot create the WAL's `-shm` file, so the store is opened
    `immutable`: read as it is on disk, which is whole once its engine closed it."""
    p = Path(path)
    uri = f"file:{urllib.parse.quote(str(p))}?mode=ro"
    if not os.access(p.parent, os.W_OK):
        uri += "&immutable=1"
    return uri


def open_readonly(path: str | os.PathLike) -> sqlite3.Connection:
    """A read-only connection for readers other than the engine (CLI listings, exports)."""
    p = Path(path)
    if not p.exists():
        raise StoreError(f"no store at {p}: run something first, or pass the right --home")
    conn = sqlite3.connect(readonly_uri(p), uri=True, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    return conn

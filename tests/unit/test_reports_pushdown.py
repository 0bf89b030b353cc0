"""One run's rows are read through SQLite's own indexes (reports/pushdown.py), with the values and
types the DuckDB scanner gives; query parameters are literals of the SQL text
(reports/sql_literals.py), so reading a report never imports pandas. Real stores written through
the Store API; the scanner's own reads are the reference."""

import math
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from autorl_tui.reports.analytics import Analytics
from autorl_tui.reports.pushdown import FEW_KEYS
from autorl_tui.reports.sql_literals import inline
from autorl_tui.store.db import Store
from tests.support.run_writer import RunShape, write_run

ROOT = Path(__file__).resolve().parents[2]
# doubles that 15 significant digits (SQLite's own text of a REAL) would not give back exactly
AWKWARD = [0.1, 1 / 3, 1_790_000_000.123456789, 2.0 ** -1074, 1e308, -123456.78901234567]


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("pushdown") / "store.db"
    store = Store(path)
    for i in range(3):
        write_run(store, RunShape(f"r{i}-o'brien", seed=i, start=1_790_000_000.0 + i * 1000))
    for k, value in enumerate(AWKWARD + [math.inf, -math.inf]):
        store.insert("metrics", {"run_id": "r1-o'brien", "name": "awkward", "source": "test", "step": k,
                                 "ts": AWKWARD[k % len(AWKWARD)], "value": value})
    store.flush()
    store.close()
    return path


@pytest.fixture(scope="module")
def a(store_path):
    with Analytics(store_path) as analytics:
        yield analytics


def rows(a, q):
    return sorted(tuple(r.values()) for r in a.sql(q))


@pytest.mark.parametrize("table,macro", [("events", "events_of"), ("metrics", "metrics_of"),
                                         ("submissions", "submissions_of"), ("attempts", "attempts_of"),
                                         ("revisions", "revisions_of"), ("resources", "resources_of")])
def test_a_runs_rows_are_the_scanners_rows_exactly(a, table, macro):
    pushed = rows(a, f"SELECT * FROM {macro}($rid)".replace("$rid", "'r1-o''brien'"))
    scanned = rows(a, f"SELECT * FROM s.{table} WHERE run_id = 'r1-o''brien'")
    assert pushed and pushed == scanned
    types = {r["column_name"]: r["column_type"] for r in a.sql(f"DESCRIBE SELECT * FROM {macro}('x')")}
    assert types == {r["column_name"]: r["column_type"] for r in a.sql(f"DESCRIBE SELECT * FROM s.{table}")}


def test_doubles_survive_the_text_sqlite_query_returns(a):
    values = [r["value"] for r in a.sql("SELECT value FROM metrics_of('r1-o''brien') WHERE name = 'awkward' "
                                        "ORDER BY step")]
    assert values == AWKWARD + [math.inf, -math.inf]
    ts = [r["ts"] for r in a.sql("SELECT ts FROM metrics_of('r1-o''brien') WHERE name = 'awkward' ORDER BY step")]
    assert ts == AWKWARD + AWKWARD[:2]


def test_integer_keys_and_key_lists(a, store_path):
    conn = sqlite3.connect(f"file:{store_path}?mode=ro", uri=True)
    subs = [r[0] for r in conn.execute("SELECT DISTINCT submission_id FROM samples WHERE submission_id IS NOT NULL")]
    conn.close()
    one = rows(a, f"SELECT * FROM samples_of_submission({subs[0]})")
    assert one and one == rows(a, f"SELECT * FROM s.samples WHERE submission_id = {subs[0]}")
    listed = "'" + "\x1f".join(map(str, subs[:3])) + "'"
    assert rows(a, f"SELECT * FROM samples_of_submission({listed})") == \
        rows(a, f"SELECT * FROM s.samples WHERE submission_id IN ({', '.join(map(str, subs[:3]))})")


def test_many_keys_read_the_table_once_and_give_the_same_rows(a):
    ids = ["r0-o'brien", "r2-o'brien"] + [f"absent-{i}" for i in range(FEW_KEYS)]
    listed = "'" + "\x1f".join(ids).replace("'", "''") + "'"
    assert rows(a, f"SELECT * FROM events_of({listed})") == \
        rows(a, "SELECT * FROM s.events WHERE run_id IN ('r0-o''brien', 'r2-o''brien')")


def test_a_store_before_training_sessions_reads_a_null_session(tmp_path):
    path = tmp_path / "old.db"
    store = Store(path)
    store.insert("metrics", {"run_id": "r", "name": "loss", "source": "stdout", "step": 1, "ts": 10.5, "value": 0.25})
    store.close()
    conn = sqlite3.connect(path)
    conn.executescript("DROP INDEX metrics_session; ALTER TABLE metrics DROP COLUMN session_id;")
    conn.close()
    with Analytics(path) as old:
        assert old.sql("SELECT value, session_id FROM metrics_of('r')") == [{"value": 0.25, "session_id": None}]


def test_parameters_become_typed_literals(a):
    got = a.sql(inline("SELECT $f AS f, $n AS n, $neg AS neg, $s AS s, $none AS none, $b AS b, "
                       "json_extract_string('{\"kind\": 1}', '$.kind') AS path",
                       {"f": AWKWARD[2], "n": 7, "neg": -3, "s": "it's $n", "none": None, "b": True}))[0]
    assert got == {"f": AWKWARD[2], "n": 7, "neg": -3, "s": "it's $n", "none": None, "b": True, "path": "1"}
    special = a.sql(inline("SELECT $x AS x, $y AS y, $z AS z", {"x": math.inf, "y": -math.inf, "z": math.nan}))[0]
    assert special["x"] == math.inf and special["y"] == -math.inf and math.isnan(special["z"])


@pytest.mark.subprocess
def test_reports_never_import_pandas_and_the_filter_reaches_sqlite(store_path, tmp_path):
    script = ("import sys\n"
              "from autorl_tui.reports.analytics import Analytics\n"
              "from autorl_tui.reports.run_report import build_run_report\n"
              "from autorl_tui.reports.compare_report import build_compare_report\n"
              f"with Analytics({str(store_path)!r}) as a:\n"
              "    build_run_report(a, \"r1-o'brien\")\n"
              "    build_compare_report(a, ids=[\"r0-o'brien\", \"r1-o'brien\", \"r2-o'brien\"])\n"
              "    print(sorted(m for m in ('pandas', 'numpy', 'pyarrow') if m in sys.modules), flush=True)\n"
              "    a.sql('SET sqlite_debug_show_queries = true')\n"      # DuckDB prints to stderr what it sends SQLite
              "    a.sql(\"SELECT count(*) FROM events_of('r1-o''brien')\")\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "[]"
    assert "FROM \"events\" WHERE \"run_id\" IN ('r1-o''brien')" in out.stderr

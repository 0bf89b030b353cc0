"""Table macros that read one run's rows of a store table through SQLite's indexes.

DuckDB's SQLite scanner filters nothing in SQLite: every `s.<table> WHERE run_id = ...` reads the
whole table, so a report of one run took longer the more runs the store held. `events_of('r1')`
(and the others below) sends `SELECT ... WHERE run_id = 'r1'` to SQLite itself and gives the rows
the types the scanner gives `s.events`. The SQL templates are sql/pushdown.sql; the queries in
sql/queries.sql call the macros with a literal key (parameters are written into the SQL text:
reports/sql_literals.py).
"""

from __future__ import annotations

from typing import Any

# (macro, table, the indexed column it filters on)
PUSHED = (
    ("run_row", "runs", "id"),
    ("events_of", "events", "run_id"),
    ("metrics_of", "metrics", "run_id"),
    ("submissions_of", "submissions", "run_id"),
    ("attempts_of", "attempts", "run_id"),
    ("revisions_of", "revisions", "run_id"),
    ("resources_of", "resources", "run_id"),
    ("samples_of_submission", "samples", "submission_id"),
    ("samples_of_baseline", "samples", "baseline_id"),
)
# Up to this many keys are looked up by SQLite; more are read by one scan of the table.
FEW_KEYS = 64
# Columns the queries read that stores written by older versions lack: NULL of the column's type.
FILLED = {"metrics": {"session_id": "BIGINT"}}


def _sqlite_column(column: str, dtype: str, sql: dict[str, str]) -> str:
    if dtype == "DOUBLE":
        return sql["sqlite_real"].replace("{column}", column)
    if dtype in ("BIGINT", "VARCHAR"):
        return f'"{column}"'
    raise ValueError(f"column {column} of type {dtype} cannot be read through sqlite_query")


def _typed(column: str, dtype: str) -> str:
    return f'"{column}"' if dtype == "VARCHAR" else f'CAST("{column}" AS {dtype}) AS "{column}"'


def create_macros(conn: Any, sql: dict[str, str]) -> None:
    """Creates the PUSHED macros on a DuckDB connection with the store attached as `s`."""
    types: dict[str, list[tuple[str, str]]] = {}
    for table, column, dtype in conn.execute(sql["column_types"]).fetchall():
        types.setdefault(table, []).append((column, dtype))
    for macro, table, key in PUSHED:
        columns = types.get(table)
        if not columns:
            continue
        inner = (sql["sqlite_rows"].replace("{columns}", ", ".join(_sqlite_column(c, t, sql) for c, t in columns))
                 .replace("{table}", table).replace("{key}", key)) + " "
        have = {c for c, _ in columns}
        typed = [_typed(c, t) for c, t in columns]
        filled = [f'CAST(NULL AS {t}) AS "{c}"' for c, t in FILLED.get(table, {}).items() if c not in have]
        scanned = [f'"{c}"' for c, _ in columns] + filled
        fill = {"{macro}": macro, "{columns}": ", ".join(typed + filled), "{scanned}": ", ".join(scanned),
                "{table}": table, "{key}": key, "{key_type}": dict(columns)[key], "{few}": str(FEW_KEYS),
                "{sqlite}": "'" + inner.replace("'", "''") + "'"}
        text = sql["rows_macro"]
        for name, value in fill.items():
            text = text.replace(name, value)
        conn.execute(text)

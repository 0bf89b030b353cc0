"""The store's schema is known in one place: SQL lives in autorl_tui/store/ (the writer, the named
read queries) and, for the read-side analytics, in autorl_tui/reports/sql/*.sql. Every other module
reads through store.queries / store.records or reports.analytics. Checked over the string literals
of the source tree (f-strings included), so SQL in a comment does not count and SQL built from
pieces still does."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "autorl_tui"

SQL = re.compile(
    r"\bSELECT\b[\s\S]*\bFROM\b"
    r"|\bINSERT\s+(?:OR\s+\w+\s+)?INTO\b"
    r"|\bUPDATE\s+[\w.{}]+\s+SET\b"
    r"|\bDELETE\s+FROM\b"
    r"|\b(?:CREATE|DROP|ALTER)\s+(?:(?:TEMP|TEMPORARY|UNIQUE|OR\s+REPLACE)\s+)*(?:TABLE|VIEW|INDEX)\b"
    r"|\bPRAGMA\s+\w+")

HOMES = ("store/",)     # reports/sql/ holds .sql files, which this check does not read

NOT_YET: tuple[str, ...] = ()

ALLOWED = {
    # The grader's verdict cache: a private SQLite file of the grader's, not the store (the grader
    # may not import store/: it knows no runs).
    "grading/judge_cache.py",
}


def sql_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of each string literal that holds SQL; an f-string's fields read as `{}`."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if SQL.search(text):
            found.setdefault(node.lineno, text)     # an f-string's own parts are visited too
    return sorted(found.items())


def test_no_sql_outside_the_store_and_reports_sql():
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(HOMES + NOT_YET) or rel in ALLOWED:
            continue
        for line, text in sql_literals(path.read_text()):
            offenders.append(f"autorl_tui/{rel}:{line}: {' '.join(text.split())[:100]}")
    assert not offenders, ("SQL outside autorl_tui/store/ (named queries: store/queries.py, records: "
                           "store/records.py) and reports/sql/:\n" + "\n".join(offenders))


def test_the_check_sees_sql_however_it_is_written():
    planted = '''
rows = conn.execute("SELECT id FROM runs WHERE state = ?", ("done",))
conn.execute(f"UPDATE {table} SET state = ?", x)
conn.execute("INSERT OR IGNORE INTO blobs VALUES (?)"
             " -- split over two literals")
q = ("SELECT max(ts) "
     "FROM s.events")
# SELECT id FROM runs     (a comment is not SQL that runs)
"""Select the runs from the list (prose is not SQL)."""
'''
    assert [line for line, _ in sql_literals(planted)] == [2, 3, 4, 6]

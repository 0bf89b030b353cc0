-- Rows of given runs read through SQLite's own indexes (reports/pushdown.py). DuckDB's SQLite
-- scanner sends no WHERE clause to SQLite: `s.events WHERE run_id = ...` reads every run's events,
-- so a report of one run grew with the store (13 s at 10,000 runs). `sqlite_query` hands SQLite the
-- whole statement; it returns every column as text, so REAL columns are printed with 17
-- significant digits (exact for a double) and every column is cast back to the scanner's type.
-- Each block starts with `-- name: <name>`; {placeholders} are filled by pushdown.py. A macro's
-- argument is one key or several joined by chr(31) (as Analytics passes id lists). Up to {few}
-- keys go to SQLite; more (a compare over a whole plan) read the table once through the scanner,
-- faster than SQLite's rows as text; DuckDB drops the other branch when it plans the query.

-- name: column_types
SELECT table_name, column_name, data_type FROM duckdb_columns()
WHERE database_name = 's' ORDER BY table_name, column_index

-- name: sqlite_rows
SELECT {columns} FROM "{table}" WHERE "{key}" IN

-- name: sqlite_real
CASE WHEN "{column}" IS NULL THEN NULL ELSE printf('%!.17g', "{column}") END AS "{column}"

-- name: rows_macro
CREATE OR REPLACE TEMP MACRO {macro}(keys) AS TABLE
SELECT {columns} FROM sqlite_query('s', {sqlite} || '(' || array_to_string(list_transform(
    string_split(CAST(keys AS VARCHAR), chr(31)), k -> '''' || replace(k, '''', '''''') || ''''), ',') || ')')
WHERE len(string_split(CAST(keys AS VARCHAR), chr(31))) <= {few}
UNION ALL
SELECT {scanned} FROM s."{table}"
WHERE len(string_split(CAST(keys AS VARCHAR), chr(31))) > {few}
  AND "{key}" IN (SELECT CAST(unnest(string_split(CAST(keys AS VARCHAR), chr(31))) AS {key_type}))

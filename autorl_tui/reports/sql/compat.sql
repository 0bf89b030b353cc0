-- The views every report reads the store through, built to the same shape for stores written by
-- older autorl-tui versions (reports/analytics.py picks the blocks by the columns the store has).
-- Each block starts with `-- name: <name>`; keep comments out of the blocks below: the column
-- blocks are joined into one select list.

-- name: store_columns
SELECT table_name, list(column_name) AS columns FROM duckdb_columns()
WHERE database_name = 's' AND table_name IN ('runs', 'metrics', 'training_sessions', 'findings') GROUP BY table_name

-- name: runs_view
CREATE OR REPLACE TEMP VIEW runs_v AS SELECT r.*{missing_columns} FROM s.runs r

-- name: runs.baseline_dev_score
r.baseline_score AS baseline_dev_score

-- name: runs.dev_improvement
r.best_dev_score - r.baseline_score AS dev_improvement

-- name: runs.imported_from
CAST(NULL AS VARCHAR) AS imported_from

-- name: metrics_view
CREATE OR REPLACE TEMP VIEW metrics_v AS SELECT * FROM s.metrics

-- name: metrics_view_before_sessions
CREATE OR REPLACE TEMP VIEW metrics_v AS SELECT *, CAST(NULL AS BIGINT) AS session_id FROM s.metrics

-- name: sessions_view
CREATE OR REPLACE TEMP VIEW sessions_v AS SELECT * FROM s.training_sessions

-- name: sessions_view_before_sessions
CREATE OR REPLACE TEMP VIEW sessions_v AS
SELECT * FROM (VALUES (CAST(NULL AS BIGINT), CAST(NULL AS VARCHAR), CAST(NULL AS BIGINT), CAST(NULL AS BIGINT),
                       CAST(NULL AS VARCHAR), CAST(NULL AS VARCHAR), CAST(NULL AS DOUBLE), CAST(NULL AS DOUBLE)))
    t(id, run_id, attempt, seq, kind, sources, started_at, ended_at)
WHERE false

-- name: findings_view
CREATE OR REPLACE TEMP VIEW findings_v AS
SELECT id, run_id, submission_id, ts, kind, severity, summary, evidence FROM s.findings

-- name: findings_view_before_trust
CREATE OR REPLACE TEMP VIEW findings_v AS
SELECT CAST(NULL AS BIGINT) AS id, CAST(NULL AS VARCHAR) AS run_id, CAST(NULL AS BIGINT) AS submission_id,
       CAST(NULL AS DOUBLE) AS ts, CAST(NULL AS VARCHAR) AS kind, CAST(NULL AS VARCHAR) AS severity,
       CAST(NULL AS VARCHAR) AS summary, CAST(NULL AS VARCHAR) AS evidence WHERE false

-- Views over the SQLite store attached read-only as `s`. Every report and the console read
-- through these; the per-run queries that take parameters are in queries.sql.
-- `runs_v` (created by Analytics before this file runs) is s.runs with baseline_dev_score and
-- dev_improvement filled in for stores written before those columns existed.

-- One row per run with the counts the run list, the run report and comparisons need.
CREATE OR REPLACE TEMP VIEW run_summary AS
WITH sub AS (
    SELECT run_id,
           count(*) AS n_submissions,
           count(*) FILTER (WHERE status = 'scored') AS n_scored,
           count(*) FILTER (WHERE status IN ('rejected', 'error', 'duplicate')) AS n_dropped,
           min(received_at) FILTER (WHERE status = 'scored') AS first_valid_at
    FROM s.submissions GROUP BY run_id
)
SELECT r.id AS run_id, r.plan_id, coalesce(r.plan_name, p.name) AS plan_name, r.task, r.level,
       r.agent, r.model, r.driver, r.seed, r.budget_s, r.executor, r.gpus_requested, r.state,
       r.failure_source, r.end_reason, r.created_at, r.started_at, r.deadline, r.ended_at,
       r.baseline_score, r.baseline_dev_score, r.best_dev_score, r.best_submission_id, r.test_score,
       r.improvement, r.dev_improvement,
       r.spec, r.current_attempt, r.tokens_in, r.tokens_out, r.cost_usd, r.imported_from, r.workspace,
       coalesce(sub.n_submissions, 0) AS n_submissions,
       coalesce(sub.n_scored, 0) AS n_scored,
       coalesce(sub.n_dropped, 0) AS n_dropped,
       sub.first_valid_at - r.started_at AS time_to_first_valid_s,
       best.received_at - r.started_at AS time_to_best_s,
       r.ended_at - r.started_at AS wall_s
FROM runs_v r
LEFT JOIN s.plans p ON p.id = r.plan_id
LEFT JOIN sub ON sub.run_id = r.id
LEFT JOIN s.submissions best ON best.id = r.best_submission_id;

-- A run's submissions in order, with time since the agent started and the running best dev score.
-- (Macros of a run id read its rows through SQLite's index: reports/pushdown.py.)
CREATE OR REPLACE TEMP MACRO submission_timeline(rid) AS TABLE
SELECT x.id AS submission_id, x.run_id, x.seq, x.status, x.score, x.improvement, x.test_score,
       x.received_at, x.graded_at, x.received_at - r.started_at AS t_s,
       x.graded_at - x.received_at AS latency_s, x.inference_s, x.grading_s, x.error,
       x.duplicate_of, x.revision_id, x.content_hash, x.path, x.metrics,
       max(x.score) OVER (PARTITION BY x.run_id ORDER BY x.seq ROWS UNBOUNDED PRECEDING) AS best_so_far,
       coalesce(x.id = r.best_submission_id, false) AS is_best
FROM submissions_of(rid) x JOIN run_row(rid) r ON r.id = x.run_id;

-- Every submission of a run that did not produce a score, and why. Never silently dropped: a
-- submission still `received`/`grading` after its run ended is listed as never graded.
CREATE OR REPLACE TEMP MACRO drops_of(rid) AS TABLE
SELECT x.id AS submission_id, x.run_id, x.seq, x.status, x.path, x.received_at,
       x.received_at - r.started_at AS t_s,
       CASE
           WHEN x.status = 'duplicate' THEN 'duplicate'
           WHEN x.status = 'rejected' THEN 'rejected'
           WHEN x.status = 'error' AND regexp_matches(lower(coalesce(x.error, '')), 'time(d)? ?out') THEN 'timed_out'
           WHEN x.status = 'error' THEN 'error'
           ELSE 'never_graded'
       END AS drop_kind,
       CASE
           WHEN x.status = 'duplicate' THEN
               'same content as submission #' || coalesce(CAST(d.seq AS VARCHAR), CAST(x.duplicate_of AS VARCHAR), '?')
               || coalesce(': ' || x.error, '')
           WHEN x.status IN ('received', 'grading') THEN 'still ' || x.status || ' when the run ended (' || r.state || ')'
           ELSE coalesce(x.error, '(no reason recorded)')
       END AS reason
FROM submissions_of(rid) x
JOIN run_row(rid) r ON r.id = x.run_id
LEFT JOIN submissions_of(rid) d ON d.id = x.duplicate_of
WHERE x.status IN ('rejected', 'error', 'duplicate')
   OR (x.status IN ('received', 'grading') AND r.state IN ('done', 'failed', 'cancelled', 'lost'));

-- A run's events with a category used by the action log and the phase heuristic.
-- Categories: action:<kind> for parsed agent actions (message, tool_call, shell, file_edit,
-- tool_result, error, usage, ... as the stream parsers emit them), otherwise the event kind.
CREATE OR REPLACE TEMP MACRO event_log(rid) AS TABLE
SELECT e.id, e.run_id, e.attempt, e.ts, e.kind, e.level, e.message, e.data,
       -- what an action acted on: a shell command, an edited path, or a tool call's input
       CASE WHEN json_valid(e.data) THEN coalesce(json_extract_string(e.data, '$.command'),
                                                   json_extract_string(e.data, '$.path'),
                                                   json_extract_string(e.data, '$.input.command'),
                                                   json_extract_string(e.data, '$.input.file_path'),
                                                   json_extract_string(e.data, '$.input.path')) END AS detail,
       CASE WHEN e.kind = 'action'
            THEN 'action:' || coalesce(CASE WHEN json_valid(e.data) THEN json_extract_string(e.data, '$.kind') END, 'other')
            ELSE e.kind END AS category
FROM events_of(rid) e;

-- Parameterised per-run queries over the views in views.sql and the attached store `s`.
-- Each block starts with `-- name: <name>`; parameters are DuckDB named parameters ($run_id ...).

-- name: runs_by_id
SELECT * FROM run_summary WHERE run_id IN (SELECT unnest(string_split($ids, chr(31)))) ORDER BY task, agent, seed, run_id;

-- name: runs_by_plan
SELECT * FROM run_summary WHERE plan_name = $plan ORDER BY task, agent, seed, run_id;

-- name: run_list
SELECT run_id, plan_name, task, level, agent, model, driver, seed, state, baseline_score, baseline_dev_score, best_dev_score,
       test_score, improvement, n_submissions, n_dropped, started_at, ended_at
FROM run_summary ORDER BY created_at DESC, run_id DESC LIMIT $limit;

-- name: submissions
SELECT * EXCLUDE (metrics), metrics FROM submission_timeline($run_id) ORDER BY seq;

-- name: drops
SELECT * FROM drops_of($run_id) ORDER BY seq;

-- name: best_submission_metrics
SELECT r.run_id, x.metrics
FROM run_summary r JOIN s.submissions x ON x.id = r.best_submission_id
WHERE r.run_id IN (SELECT unnest(string_split($ids, chr(31))));

-- Training metric series, one per (training session, name), downsampled to at most $max_points
-- buckets: each bucket holds an equal share of the series' points in time order and reports
-- mean/min/max over the finite values, plus how many points were NaN (stored as NULL) or infinite.
-- Points of stores older than sessions (session_id NULL) form one series per (name, source).
-- name: metric_series
WITH m AS (SELECT * FROM run_metric_rows WHERE run_id = $run_id)
SELECT session_id, any_value(session_seq) AS session_seq, any_value(session_kind) AS session_kind, name,
       string_agg(DISTINCT source, ',' ORDER BY source) AS source,
       CAST(CASE WHEN n <= $max_points THEN i ELSE floor(i * $max_points / n) END AS BIGINT) AS bucket,
       count(*) AS n_points, min(step) AS step_min, max(step) AS step_max, min(ts) - $t0 AS t_s,
       avg(value) FILTER (WHERE isfinite(value)) AS mean,
       min(value) FILTER (WHERE isfinite(value)) AS min,
       max(value) FILTER (WHERE isfinite(value)) AS max,
       count(*) FILTER (WHERE value IS NULL) AS n_nan,
       count(*) FILTER (WHERE value IS NOT NULL AND NOT isfinite(value)) AS n_inf
FROM m GROUP BY session_id, name, legacy_source, bucket
ORDER BY name, min(session_seq) NULLS FIRST, session_id, bucket;

-- Whole-series statistics the danger signals are computed from (raw points, not buckets), one row
-- per (training session, name): a signal never compares two sessions.
-- head/tail = mean of the first/last tenth of the finite points in time order.
-- name: metric_stats
WITH m AS (
    SELECT * FROM run_metric_rows WHERE run_id = $run_id
), med AS (
    SELECT session_id, name, legacy_source, median(value) FILTER (WHERE isfinite(value)) AS median
    FROM m GROUP BY session_id, name, legacy_source
)
SELECT m.session_id, any_value(m.session_seq) AS session_seq, any_value(m.session_kind) AS session_kind,
       m.name, string_agg(DISTINCT m.source, ',' ORDER BY m.source) AS source,
       any_value(m.n) AS n_points, any_value(med.median) AS median,
       median(abs(m.value - med.median)) FILTER (WHERE isfinite(m.value)) AS mad,
       max(m.value) FILTER (WHERE isfinite(m.value)) AS max,
       min(m.value) FILTER (WHERE isfinite(m.value)) AS min,
       arg_max(m.step, m.value) FILTER (WHERE isfinite(m.value)) AS step_at_max,
       avg(m.value) FILTER (WHERE isfinite(m.value) AND m.i < greatest(1, m.n // 10)) AS head_mean,
       avg(m.value) FILTER (WHERE isfinite(m.value) AND m.i >= m.n - greatest(1, m.n // 10)) AS tail_mean,
       arg_min(m.value, m.i) AS first_value, arg_max(m.value, m.i) AS last_value,
       count(*) FILTER (WHERE m.value IS NULL) AS n_nan,
       count(*) FILTER (WHERE m.value IS NOT NULL AND NOT isfinite(m.value)) AS n_inf,
       arg_min(m.step, m.i) FILTER (WHERE m.value IS NULL OR NOT isfinite(m.value)) AS first_bad_step,
       min(m.ts) - $t0 AS first_t_s, max(m.ts) - $t0 AS last_t_s,
       any_value(m.phase) AS phase
FROM m JOIN med ON med.name = m.name AND med.session_id IS NOT DISTINCT FROM m.session_id
                AND med.legacy_source IS NOT DISTINCT FROM m.legacy_source
GROUP BY m.session_id, m.name, m.legacy_source ORDER BY m.name, min(m.session_seq) NULLS FIRST, m.session_id;

-- Mean of one session's reward series over the time since the previous scored submission, per
-- scored submission: the evidence for "reward rising while the dev score falls".
-- name: reward_between_submissions
WITH subs AS (
    SELECT seq, received_at, score, lag(received_at) OVER (ORDER BY seq) AS prev_at
    FROM submissions_of($run_id) WHERE status = 'scored'
), rw AS (
    SELECT ts, value FROM run_metric_rows
    WHERE run_id = $run_id AND name = $name AND isfinite(value) AND session_id IS NOT DISTINCT FROM $session_id
)
SELECT subs.seq, subs.score, subs.received_at, avg(rw.value) AS reward_mean, count(rw.value) AS n_points
FROM subs LEFT JOIN rw ON rw.ts <= subs.received_at AND (subs.prev_at IS NULL OR rw.ts > subs.prev_at)
GROUP BY ALL ORDER BY subs.seq;

-- run_event_log is event_log for one run, materialised by Analytics._focus_events (one scan of
-- the store's events instead of one per query).

-- Activity per time bucket for the phase heuristic (see analytics.phases).
-- name: phase_event_signals
SELECT CAST(floor((ts - $t0) / $width) AS BIGINT) AS b,
       count(*) FILTER (WHERE category IN ('action:file_edit', 'action:edit', 'action:write', 'action:create')) AS n_edit,
       -- a training command run as a tool call, or announced on the agent's stdout (a scripted
       -- pipeline's "running python code/sft.py ..."): its start-up is training, not exploring
       count(*) FILTER (WHERE (category IN ('action:shell', 'action:tool_call') OR kind = 'stdout')
                        AND regexp_matches(lower(coalesce(detail, message)), $train_re)) AS n_train_cmd,
       count(*) FILTER (WHERE category LIKE 'action:%' AND category NOT IN ('action:usage', 'action:malformed')) AS n_action,
       count(*) FILTER (WHERE kind IN ('stdout', 'stderr')) AS n_output
FROM run_event_log WHERE run_id = $run_id AND ts >= $t0 AND ts < $t1 GROUP BY b;

-- name: phase_metric_signals
SELECT CAST(floor((ts - $t0) / $width) AS BIGINT) AS b, count(*) AS n_metric
FROM run_metric_rows WHERE run_id = $run_id AND ts >= $t0 AND ts < $t1 GROUP BY b;

-- A code/ snapshot counts as writing code only when its content differs from the snapshot before
-- (the watcher also snapshots unchanged or empty folders).
-- name: phase_revision_signals
WITH r AS (
    SELECT ts, reason, n_files, manifest, lag(manifest) OVER (ORDER BY seq) AS previous
    FROM revisions_of($run_id)
)
SELECT CAST(floor((ts - $t0) / $width) AS BIGINT) AS b, count(*) AS n_revision
FROM r WHERE reason = 'change' AND n_files > 0 AND manifest IS DISTINCT FROM previous
  AND ts >= $t0 AND ts < $t1 GROUP BY b;

-- When the agent stopped: the last attempt's end (after it the harness grades the held-out split).
-- name: agent_end
SELECT run_id, max(ended_at) AS ended_at,
       count(*) FILTER (WHERE ended_at IS NULL AND started_at IS NOT NULL) AS running
FROM attempts_of($ids) GROUP BY run_id;

-- name: grading_intervals
SELECT seq, received_at, coalesce(graded_at, received_at) AS graded_at
FROM submissions_of($run_id) ORDER BY seq;

-- One split's samples of a submission (the selected one also holds the held-out test split's).
-- name: failure_counts
SELECT CASE WHEN coalesce(correct, 0) = 1 THEN 'correct' ELSE coalesce(failure_kind, 'unclassified') END AS kind,
       count(*) AS n
FROM samples_of_submission($submission_id) WHERE split = $split GROUP BY kind ORDER BY n DESC, kind;

-- name: badcase_examples
SELECT * FROM (
    SELECT sample_id, coalesce(failure_kind, 'unclassified') AS failure_kind,
           left(prompt, $chars) AS prompt, length(prompt) AS prompt_len,
           left(output, $chars) AS output, length(output) AS output_len,
           left(extracted, $chars) AS extracted, left(expected, $chars) AS expected, tokens,
           left(error, $chars) AS error,
           row_number() OVER (PARTITION BY coalesce(failure_kind, 'unclassified') ORDER BY sample_id, id) AS rn
    FROM samples_of_submission($submission_id) WHERE split = $split AND coalesce(correct, 0) = 0
) WHERE rn <= $per_kind ORDER BY failure_kind, rn;

-- name: baseline_for_run
SELECT b.id, b.score, b.split, b.protocol_hash, b.grader_version, b.created_at
FROM s.baselines b JOIN run_row($run_id) r ON r.task = b.task AND r.model = b.model
WHERE b.split = 'dev' ORDER BY b.created_at DESC LIMIT 1;

-- Per-sample change against the baseline's samples (matched by sample id).
-- name: versus_baseline
SELECT count(*) AS n_common,
       count(*) FILTER (WHERE coalesce(b.correct, 0) = 0 AND coalesce(x.correct, 0) = 1) AS fixed,
       count(*) FILTER (WHERE coalesce(b.correct, 0) = 1 AND coalesce(x.correct, 0) = 0) AS broken
FROM samples_of_submission($submission_id) x
JOIN samples_of_baseline($baseline_id) b ON b.sample_id = x.sample_id AND b.split = x.split;

-- Per held-out question of each run: the base model's and the tested submission's share of correct
-- samples, paired by sample id. The base model's test baseline is the one the run's own harness
-- events name. Two steps, so the samples are read by submission and baseline id (their indexes):
-- held_out_keys gives each run's tested submission and test baseline, held_out_pairs the pairs.
-- name: held_out_keys
SELECT r.id AS run_id, r.best_submission_id AS submission_id, base.baseline_id
FROM run_row($ids) r JOIN (
    SELECT run_id, max(CAST(json_extract_string(data, '$.baseline_id') AS BIGINT)) AS baseline_id
    FROM events_of($ids)
    WHERE kind = 'harness' AND json_valid(data)
      AND json_extract_string(data, '$.split') = 'test' AND json_extract_string(data, '$.baseline_id') IS NOT NULL
    GROUP BY run_id
) base ON base.run_id = r.id
WHERE r.test_score IS NOT NULL AND r.best_submission_id IS NOT NULL;

-- $ids, $subs, $bases: held_out_keys' columns, as lists in the same order.
-- name: held_out_pairs
WITH k AS (
    SELECT unnest(string_split($ids, chr(31))) AS run_id,
           CAST(unnest(string_split($subs, chr(31))) AS BIGINT) AS submission_id,
           CAST(unnest(string_split($bases, chr(31))) AS BIGINT) AS baseline_id
), t AS (
    SELECT k.run_id, k.baseline_id, x.sample_id, avg(coalesce(x.correct, 0)) AS correct
    FROM k JOIN samples_of_submission($subs) x ON x.submission_id = k.submission_id AND x.split = 'test'
    GROUP BY k.run_id, k.baseline_id, x.sample_id
), b AS (
    SELECT baseline_id, sample_id, avg(coalesce(correct, 0)) AS correct
    FROM samples_of_baseline($bases) WHERE split = 'test' GROUP BY baseline_id, sample_id
)
SELECT t.run_id, t.sample_id, b.correct AS base, t.correct AS trained
FROM t JOIN b ON b.baseline_id = t.baseline_id AND b.sample_id = t.sample_id
ORDER BY t.run_id, t.sample_id;

-- name: sample_results
SELECT sample_id, split, correct, score, tokens, failure_kind, error
FROM samples_of_submission($submission_id) ORDER BY sample_id, id;

-- One run's training metrics (grading-sourced series excluded: those are the harness's own
-- scores, shown from submissions) with their training session and each point's index i in its
-- series (session, name) and the series size n. `metrics_v` and `sessions_v` are created by
-- Analytics (they fill session columns in for stores older than training sessions).
-- name: focus_metrics
CREATE OR REPLACE TEMP TABLE run_metric_rows AS
SELECT m.run_id, m.id, m.name, m.source, m.step, m.ts, m.value, m.phase, m.session_id,
       ts.seq AS session_seq, ts.kind AS session_kind,
       CASE WHEN m.session_id IS NULL THEN m.source END AS legacy_source,
       row_number() OVER (PARTITION BY m.session_id, m.name, legacy_source ORDER BY m.ts, m.id) - 1 AS i,
       count(*) OVER (PARTITION BY m.session_id, m.name, legacy_source) AS n
FROM metrics_of($run_id) m LEFT JOIN sessions_v ts ON ts.id = m.session_id
WHERE m.source <> 'grading';

-- name: focus_events
CREATE OR REPLACE TEMP TABLE run_event_log AS SELECT * FROM event_log($run_id);

-- name: event_counts
SELECT category, count(*) AS n, min(ts) - $t0 AS first_t_s, max(ts) - $t0 AS last_t_s
FROM run_event_log WHERE run_id = $run_id GROUP BY category ORDER BY category;

-- The action log, capped: the first $head and last $tail events of each category.
-- name: event_log_capped
SELECT * FROM (
    SELECT id, ts - $t0 AS t_s, category, level, left(message, $chars) AS message,
           length(message) AS message_len, left(detail, $chars) AS detail,
           row_number() OVER (PARTITION BY category ORDER BY id) AS rn,
           count(*) OVER (PARTITION BY category) AS n
    FROM run_event_log WHERE run_id = $run_id
) WHERE rn <= $head OR rn > n - $tail ORDER BY category, id;

-- name: revisions
SELECT id, seq, ts - $t0 AS t_s, reason, manifest, n_files, total_bytes, skipped
FROM revisions_of($run_id) ORDER BY seq;

-- name: blobs
SELECT sha256, encoding, content, size FROM s.blobs WHERE sha256 IN (SELECT unnest(string_split($shas, chr(31))));

-- CPU-hours integrate cpu_percent over the time to the next sample (capped at $max_gap s so a
-- stalled sampler does not inflate them); GPU busy-hours do the same with the sum of GPU utils.
-- name: resource_cost
WITH r AS (
    SELECT run_id, ts, cpu_percent, rss_bytes, gpus,
           least(coalesce(lead(ts) OVER (PARTITION BY run_id ORDER BY ts, id) - ts, 0), $max_gap) AS dt
    FROM resources_of($ids)
)
SELECT run_id, count(*) AS n_samples,
       sum(coalesce(cpu_percent, 0) / 100 * dt) / 3600 AS cpu_hours,
       avg(cpu_percent) AS mean_cpu_percent,
       max(rss_bytes) AS peak_rss_bytes,
       sum(CASE WHEN gpus IS NULL OR NOT json_valid(gpus) THEN 0
                ELSE coalesce(list_sum(CAST(json_extract(gpus, '$[*].util') AS DOUBLE[])), 0) / 100 * dt END) / 3600
           AS gpu_busy_hours
FROM r GROUP BY run_id;

-- The host's load average while the run was sampled: why a wall-clock budget bought less
-- training than on an idle machine (the agent shares the cores).
-- name: host_load
SELECT run_id, count(load1) AS n_samples, avg(load1) AS load1_mean, max(load1) AS load1_max,
       avg(load5) AS load5_mean, avg(load15) AS load15_mean
FROM resources_of($ids) GROUP BY run_id;

-- name: gpu_allocated
SELECT run_id, coalesce(sum((coalesce(ended_at, $now) - started_at)
                    * CASE WHEN json_valid(gpus) THEN coalesce(json_array_length(gpus), 0) ELSE 0 END), 0) / 3600
           AS gpu_allocated_hours,
       count(*) AS n_attempts
FROM attempts_of($ids) WHERE started_at IS NOT NULL GROUP BY run_id;

-- name: grading_time
SELECT run_id, coalesce(sum(inference_s), 0) AS inference_s, coalesce(sum(grading_s), 0) AS grading_s
FROM submissions_of($ids) GROUP BY run_id;

-- name: attempts
SELECT number, state, executor, started_at - $t0 AS start_s, ended_at - started_at AS duration_s,
       exit_code, error, gpus
FROM attempts_of($run_id) ORDER BY number;

-- name: run_ids_starting
SELECT id AS run_id FROM s.runs WHERE starts_with(id, $prefix);

-- name: training_sessions
SELECT id, seq, attempt, kind, sources, started_at, ended_at FROM sessions_v WHERE run_id = $run_id ORDER BY seq;

-- The newest row of a run's events or metrics and how many it has: whether its focus copy is stale.
-- name: newest_events
SELECT max(id) AS id, count(*) AS n FROM events_of($run_id);

-- name: newest_metrics
SELECT max(id) AS id, count(*) AS n FROM metrics_of($run_id);

-- The agent's actions and output lines that name a script (`python code/train.py`), in order.
-- name: commands
SELECT ts, message FROM events_of($run_id) WHERE kind IN ('action', 'stdout')
AND regexp_matches(message, '\.(py|sh)\b') ORDER BY id LIMIT $limit;

-- name: run_t0
SELECT coalesce(started_at, created_at) AS t0 FROM run_row($run_id);

-- name: last_activity
SELECT max(ts) AS ts FROM events_of($run_id);

-- Why a failed or lost run ended: its newest error events (with their data: a traceback) and the
-- agent's last stderr lines, newest first.
-- name: failure_cause_errors
SELECT ts - $t0 AS t_s, kind, message, data FROM events_of($run_id)
WHERE level = 'error' ORDER BY id DESC LIMIT 3;

-- name: failure_cause_stderr
SELECT message FROM events_of($run_id) WHERE kind = 'stderr' ORDER BY id DESC LIMIT $n;

-- Trust findings of the given runs (store/findings.py), in time order.
-- name: findings
SELECT f.*, x.seq AS submission_seq FROM findings_v f LEFT JOIN s.submissions x ON x.id = f.submission_id
WHERE f.run_id IN (SELECT unnest(string_split($ids, chr(31)))) ORDER BY f.run_id, f.ts, f.id;

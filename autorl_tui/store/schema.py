"""Versioned schema. Each migration runs once, in order, inside a transaction; never edit a
migration that has shipped: append a new one."""

MIGRATIONS: list[str] = [
    # 1: the initial schema
    """
    CREATE TABLE plans (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        source TEXT,              -- the plan YAML as given
        created_at REAL NOT NULL
    );
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        plan_id TEXT REFERENCES plans(id),
        plan_name TEXT,
        task TEXT NOT NULL,
        level INTEGER,
        agent TEXT NOT NULL,
        model TEXT NOT NULL,
        driver TEXT,              -- driver LLM, when the agent has one
        seed INTEGER NOT NULL DEFAULT 0,
        budget_s REAL NOT NULL,
        executor TEXT NOT NULL DEFAULT 'local',
        gpus_requested INTEGER NOT NULL DEFAULT 0,
        priority INTEGER NOT NULL DEFAULT 0,
        queue_pos REAL NOT NULL DEFAULT 0,
        state TEXT NOT NULL,
        failure_source TEXT,      -- agent | infra | task | grader | user | budget
        end_reason TEXT,
        created_at REAL NOT NULL,
        started_at REAL,          -- agent start (budget clock)
        deadline REAL,
        ended_at REAL,
        baseline_score REAL,      -- base model on the held-out test split (compare with test_score)
        baseline_dev_score REAL,  -- base model on dev (what the agent's improvements are measured from)
        best_dev_score REAL,
        best_submission_id INTEGER,
        test_score REAL,
        improvement REAL,         -- test_score - baseline_score, in points
        dev_improvement REAL,     -- best_dev_score - baseline_dev_score, in points
        workspace TEXT,
        spec TEXT NOT NULL,       -- JSON: resolved task card, protocol, agent spec, model path
        current_attempt INTEGER NOT NULL DEFAULT 0,
        tokens_in INTEGER,
        tokens_out INTEGER,
        cost_usd REAL
    );
    CREATE INDEX runs_state ON runs(state);
    CREATE INDEX runs_plan ON runs(plan_id);

    CREATE TABLE attempts (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs(id),
        number INTEGER NOT NULL,
        state TEXT NOT NULL,      -- starting | running | exited | killed | lost | failed
        executor TEXT NOT NULL,
        started_at REAL,
        ended_at REAL,
        pid INTEGER,              -- local executor: the supervising shim
        container_id TEXT,
        gpus TEXT,                -- JSON list of device ids
        exit_code INTEGER,
        error TEXT,
        log_dir TEXT,
        offsets TEXT,             -- JSON: byte offsets of tailed files, for re-adoption
        grading_url TEXT,         -- the run's grading API (rebound on the same port after a restart)
        UNIQUE(run_id, number)
    );

    CREATE TABLE events (
        id INTEGER PRIMARY KEY,
        run_id TEXT,
        attempt INTEGER,
        ts REAL NOT NULL,
        kind TEXT NOT NULL,       -- state | stdout | stderr | action | harness | grading | error | submission
        level TEXT NOT NULL DEFAULT 'info',
        message TEXT NOT NULL,
        data TEXT                 -- JSON
    );
    CREATE INDEX events_run ON events(run_id, id);

    CREATE TABLE metrics (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL,
        attempt INTEGER,
        ts REAL NOT NULL,
        step INTEGER,
        name TEXT NOT NULL,
        value REAL,
        source TEXT NOT NULL,     -- metrics_jsonl | trainer_state | tensorboard | stdout | grading
        phase TEXT
    );
    CREATE INDEX metrics_run ON metrics(run_id, name, step);

    CREATE TABLE revisions (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        ts REAL NOT NULL,
        reason TEXT NOT NULL,     -- change | submission | final
        manifest TEXT NOT NULL,   -- JSON {relative path: sha256}
        n_files INTEGER NOT NULL,
        total_bytes INTEGER NOT NULL,
        skipped TEXT,             -- JSON list of files left out (binary, too large)
        UNIQUE(run_id, seq)
    );

    CREATE TABLE blobs (
        sha256 TEXT PRIMARY KEY,
        size INTEGER NOT NULL,
        encoding TEXT NOT NULL,   -- zlib | raw
        content BLOB NOT NULL
    );

    CREATE TABLE submissions (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL,
        attempt INTEGER,
        seq INTEGER NOT NULL,     -- 1, 2, ... within the run
        path TEXT NOT NULL,       -- as the agent gave it
        snapshot_path TEXT,
        content_hash TEXT,
        revision_id INTEGER,
        received_at REAL NOT NULL,
        graded_at REAL,
        status TEXT NOT NULL,     -- received | grading | scored | rejected | error | duplicate
        score REAL,               -- dev score, 0-100
        improvement REAL,
        error TEXT,
        duplicate_of INTEGER,
        metrics TEXT,             -- JSON: the scorer's metrics
        inference_s REAL,
        grading_s REAL,
        test_score REAL,          -- filled for the selected submission only
        UNIQUE(run_id, seq)
    );
    CREATE INDEX submissions_run ON submissions(run_id);

    CREATE TABLE baselines (
        id INTEGER PRIMARY KEY,
        task TEXT NOT NULL,
        model TEXT NOT NULL,
        protocol_hash TEXT NOT NULL,
        grader_version TEXT NOT NULL,
        split TEXT NOT NULL,
        score REAL NOT NULL,
        metrics TEXT,
        created_at REAL NOT NULL,
        UNIQUE(task, model, protocol_hash, grader_version, split)
    );

    CREATE TABLE samples (
        id INTEGER PRIMARY KEY,
        run_id TEXT,
        submission_id INTEGER,
        baseline_id INTEGER,
        split TEXT NOT NULL,
        sample_id TEXT NOT NULL,
        prompt TEXT,
        output TEXT,
        extracted TEXT,
        expected TEXT,
        correct INTEGER,
        score REAL,
        tokens INTEGER,
        failure_kind TEXT,        -- wrong_answer | format_error | truncated | empty | runtime_error | timeout
        error TEXT,
        data TEXT                 -- JSON: scorer-specific (trajectory, test output, judge verdicts)
    );
    CREATE INDEX samples_sub ON samples(submission_id);
    CREATE INDEX samples_base ON samples(baseline_id);

    CREATE TABLE resources (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL,
        ts REAL NOT NULL,
        cpu_percent REAL,
        rss_bytes INTEGER,
        n_procs INTEGER,
        gpus TEXT                 -- JSON list: [{index, util, mem_used, mem_total}]
    );
    CREATE INDEX resources_run ON resources(run_id, ts);
    """,
]

MIGRATIONS.append(
    # 2: infrastructure retries wait out a backoff before their next attempt
    """
    ALTER TABLE runs ADD COLUMN not_before REAL
    """)

MIGRATIONS.append(
    # 3: training sessions: every training metric point belongs to one trainer run (one `trl sft`,
    # one GRPO stage...), stored once whichever sources reported it (instrument/sessions.py)
    """
    CREATE TABLE training_sessions (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL,
        attempt INTEGER,
        seq INTEGER NOT NULL,     -- 1, 2, ... within the run, in start order
        kind TEXT NOT NULL,       -- sft | grpo | dpo | ppo | rm | unknown (from the names it logs)
        sources TEXT,             -- JSON list: "stdout", "trainer_state:<path>", "tensorboard:<path>", "metrics_jsonl:<path>"
        started_at REAL NOT NULL,
        ended_at REAL             -- when the trainer printed its summary, if it did
    );
    CREATE INDEX training_sessions_run ON training_sessions(run_id, seq);
    ALTER TABLE metrics ADD COLUMN session_id INTEGER;
    CREATE INDEX metrics_session ON metrics(session_id)
    """)

MIGRATIONS.append(
    # 4: runs brought in from
    # another harness's files, marked with where they came from. They have no held-out test of
    # ours (test_score stays NULL) and no attempts (commands/import_.py, docs/autorl-bench.md).
    """
    ALTER TABLE runs ADD COLUMN imported_from TEXT
    """)

MIGRATIONS.append(
    # 5: trust findings: evidence about how a run's scores were earned (model provenance of every
    # submission, contamination, honey-token reads, attempts on protected paths): docs/trust.md
    """
    CREATE TABLE findings (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL,
        submission_id INTEGER,    -- provenance: the submission it is about
        ts REAL NOT NULL,         -- when the harness saw it (a decoy read: the kernel event's time)
        kind TEXT NOT NULL,       -- provenance | contamination | honey_token | protected_path
        severity TEXT NOT NULL,   -- info (recorded, not a flag) | warning | critical
        summary TEXT NOT NULL,
        evidence TEXT             -- JSON: what the summary rests on
    );
    CREATE INDEX findings_run ON findings(run_id, ts)
    """)
MIGRATIONS.append(
    # 6: the host's load average (1, 5, 15 min) with each resource sample, so a report can say why
    # a run was slow (the budget is wall-clock; a busy machine gives the agent less CPU); an index
    # for the console's paged snapshot
    """
    ALTER TABLE resources ADD COLUMN load1 REAL;
    ALTER TABLE resources ADD COLUMN load5 REAL;
    ALTER TABLE resources ADD COLUMN load15 REAL;
    -- and the console's snapshot reads the runs a page at a time, newest first (run_summaries)
    CREATE INDEX runs_created ON runs(created_at, id)
    """)
MIGRATIONS.append(
    # 7: what an active run waits for (NULL: nothing), e.g. `cluster`: an executor ray run whose
    # cluster is unreachable (its budget clock stopped meanwhile); and the backend and device a
    # baseline was graded with, part of its cache key ("transformers/cpu", "vllm/cuda")
    # (rows from before have none: they are graded again, never reused for a device they may not
    # have been graded on)
    """
    ALTER TABLE runs ADD COLUMN waiting TEXT;
    CREATE TABLE baselines_v7 (
        id INTEGER PRIMARY KEY,
        task TEXT NOT NULL,
        model TEXT NOT NULL,
        protocol_hash TEXT NOT NULL,
        grader_version TEXT NOT NULL,
        split TEXT NOT NULL,
        score REAL NOT NULL,
        metrics TEXT,
        created_at REAL NOT NULL,
        grading TEXT,
        UNIQUE(task, model, protocol_hash, grader_version, split, grading)
    );
    INSERT INTO baselines_v7 (id, task, model, protocol_hash, grader_version, split, score, metrics, created_at)
        SELECT id, task, model, protocol_hash, grader_version, split, score, metrics, created_at FROM baselines;
    DROP TABLE baselines;
    ALTER TABLE baselines_v7 RENAME TO baselines
    """)
SCHEMA_VERSION = len(MIGRATIONS)

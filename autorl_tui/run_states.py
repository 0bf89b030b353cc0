"""The run-state vocabulary: the one home of the states' names and groups (everyone imports them).

    queued → preparing → baseline → running ⇄ paused → finalizing → done
    or failed (with failure_source), cancelled, lost

Transitions are the supervisor's (engine/supervisor.py, recorded by engine/run_journal.py);
docs/ARCHITECTURE.md, "Run states". SQL that needs the groups (reports/sql/views.sql) spells them
out; tests/unit/test_run_states.py checks it against these. A leaf module: it imports nothing.
"""
QUEUED = "queued"
ACTIVE_STATES = ("preparing", "baseline", "running", "paused", "finalizing")   # an attempt is under way
FINAL_STATES = ("done", "failed", "cancelled", "lost")                         # the run has ended
UNSUCCESSFUL_STATES = ("failed", "cancelled", "lost")   # ended without a result: may be retried
ALL_STATES = (QUEUED, *ACTIVE_STATES, *FINAL_STATES)

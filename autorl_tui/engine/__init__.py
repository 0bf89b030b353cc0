"""The engine: the scheduler and the run pipeline (run supervisors, the run's journal, workspaces,
submissions and gradings of a run, the per-run API run_api.py, finalization).

It runs attempts through executors/ (sandboxed by isolation/), watches them with instrument/, grades
through grading_host/; the detached engine and its socket are daemon/.
UI-agnostic: nothing below the console imports Textual or the console (a test checks)."""

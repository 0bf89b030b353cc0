"""The engine: scheduler, run supervisors, workspaces, executors, the per-run API (run_api.py),
instrumentation.

UI-agnostic: nothing below this package imports Textual or the console (a test checks)."""

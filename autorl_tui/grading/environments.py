"""The interface an interactive task's environment implements for the generic `env_success` scorer.

An environment is a plugin (`autorl_tui/registry.py`, kind `environments`): a name (the card's
`scorer_options.env`) -> a class built with no arguments. The scorer owns the policy (the submitted
model) and the protocol; the environment owns the episodes: what one is, how its prompts read,
how a reply becomes an action, and when it is won. Episodes run batched: every live episode
advances by one step per `generate` call. ALFWorld (`tasks/alfworld/environment.py`) is the
reference implementation; docs/tasks.md describes how to add one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Protocol

# generate(prompts) -> one reply per prompt (a Completion, or a string); prompts are chat message
# lists, or strings when the environment's `to_text` was applied for `prompt_format: plain`.
Generate = Callable[[list[Any]], list]


class Observation(Protocol):
    """What the environment says after reset() or a step."""
    text: str                 # the intro at reset, the feedback after a step
    admissible: list[str]     # actions it accepts now (empty when free-form)
    won: bool
    moves: int

    @property
    def reward(self) -> float: ...   # this step's reward (ALFWorld: 1.0 when won, else 0.0)

    @property
    def done(self) -> bool: ...


class Episode(Protocol):
    """One episode, playable repeatedly: reset() then step(action) until done."""
    task: str                 # the goal, known after reset()
    task_type: str

    def reset(self) -> Observation: ...
    def step(self, action: str) -> Observation: ...
    def close(self) -> None: ...


class EpisodeRecord(Protocol):
    """One finished episode, with its trajectory (one dict per step: observation, prompt, raw
    reply, action, feedback) kept in the sample so reports and agents can replay it."""
    game_id: str          # the episode's id (unique in the split)
    gamefile: str         # where the episode was defined (file, URL, seed...)
    task_type: str        # its category; success rates are also reported per category
    task: str             # the goal as shown to the policy
    won: bool
    steps: int
    invalid_steps: int    # replies that were not exactly an admissible action
    unmatched_steps: int  # ...of which nothing admissible was close enough (no move made)
    thought_steps: int
    tokens: int
    trajectory: list[dict]
    error: str | None


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
        total) hears each finished episode."""

    def to_text(self, messages: list[dict]) -> str:
        """A chat prompt as plain text (for `protocol.prompt_format: plain`)."""

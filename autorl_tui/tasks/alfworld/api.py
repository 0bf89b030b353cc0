"""Play ALFWorld games with a language-model policy: ALFWorld's hooks for the generic batched
episode runner (`episodes.py`, the grader's `autorl_tui/grading/episodes.py`).

Standalone (relative imports only): the grader's `env_success` scorer uses it, and the same files
(with the generic runner as `episodes.py`) are copied into the agent's workspace as the
`alfworld_api` package, so an agent's online rollouts see exactly the prompts, matching and step
accounting the grader uses.

    import sys; sys.path.insert(0, os.environ["DATA_PATH"])
    from alfworld_api import list_games, run_episodes
    games = list_games()                                  # the train games in DATA_PATH
    results = run_episodes(my_generate, games[:8], max_steps=30)
    # my_generate(list_of_chat_message_lists) -> list of reply strings

Each result has `won`, `steps` and the full `trajectory` (observation, prompt, raw reply,
command, feedback per step): the material for SFT, rejection sampling, or GRPO rewards.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

from .game import AlfworldGame
from .episodes import EpisodeRecord, EpisodeState, Generate, Parsed
from .episodes import run_episodes as run_generic
from .prompts import INVALID_FEEDBACK, THOUGHT_FEEDBACK, build_messages, match_action, parse_reply
from .react import ReactGame, ReactPromptsError, build_prompt as react_text, game_name, prompt_key, prompt_prefix
from .react import parse as react_parse

EpisodeResult = EpisodeRecord   # the name agents' code imports
__all__ = ["EpisodeResult", "Generate", "list_games", "run_episodes", "run_react_episodes"]


def list_games(data_path: str | os.PathLike | None = None, task_type: str | None = None) -> list[dict]:
    """The games of a split folder (default: $DATA_PATH) as dicts with id, gamefile, task_type."""
    root = Path(data_path or os.environ.get("DATA_PATH") or ".")
    index = root / "items.jsonl"
    if not index.exists():
        raise FileNotFoundError(f"{index} not found: pass the folder holding items.jsonl (the task's data folder)")
    games = []
    for line in index.read_text().splitlines():
        if line.strip():
            item = json.loads(line)
            item["gamefile"] = str((root / item["gamefile"]).resolve())
            if task_type is None or item.get("task_type") == task_type:
                games.append(item)
    return games


def run_episodes(generate: Generate, games: list[dict], *, max_steps: int = 30, batch_size: int = 16,
                 few_shot: bool = False, history_len: int = 5, match_threshold: float = 0.6,
                 log: Callable[[str], None] | None = None,
                 on_progress: Callable[[int, int], None] | None = None) -> list[EpisodeResult]:
    """Play every game once. All live episodes advance together: one `generate` call per step
    over up to `batch_size` episodes; a finished episode's slot goes to the next game."""

    def build_prompt(state: EpisodeState) -> list[dict]:
        return build_messages(state.intro, state.history, state.obs.admissible,
                              task_type=state.record.task_type, few_shot=few_shot, history_len=history_len)

    def parse(reply: str, obs) -> Parsed:
        thought, text = parse_reply(reply)
        command, exact = match_action(text, obs.admissible, match_threshold)
        return Parsed(action=command, exact=exact, thought=thought, text=text)

    return run_generic(generate, games, open_episode=lambda item: AlfworldGame(item["gamefile"]),
                       build_prompt=build_prompt, parse_reply=parse, max_steps=max_steps,
                       batch_size=batch_size, thought_feedback=THOUGHT_FEEDBACK,
                       invalid_feedback=INVALID_FEEDBACK, log=log, on_progress=on_progress)


def run_react_episodes(generate: Generate, games: list[dict], *, prompts: dict, max_steps: int = 50,
                       batch_size: int = 16, log: Callable[[str], None] | None = None,
                       on_progress: Callable[[int, int], None] | None = None) -> list[EpisodeResult]:
    """Play every game under AutoRL-Bench's protocol (react.py): `generate` gets one message per
    episode whose `content` is the whole text to complete (marked `completion: True`); replies are
    cut at their first newline and sent to the engine verbatim. `prompts`: react.load_prompts()."""

    def build_prompt(state: EpisodeState) -> list[dict]:
        key = prompt_key(game_name(state.item["gamefile"]), state.record.task_type or "")
        if key is None:
            raise ReactPromptsError(f"{state.item['gamefile']}: not one of the six ALFWorld task types")
        return [{"role": "user", "completion": True,
                 "content": react_text(prompt_prefix(prompts, key), state.intro, state.history)}]

    return run_generic(generate, games, open_episode=lambda item: ReactGame(item["gamefile"]),
                       build_prompt=build_prompt, parse_reply=react_parse, max_steps=max_steps,
                       batch_size=batch_size, log=log, on_progress=on_progress)

"""Play ALFWorld games with a language-model policy: the batched episode runner.

Standalone (relative imports only): the grader's `env_success` scorer uses it, and the same files
are copied into the agent's workspace as the `alfworld_api` package, so an agent's online
rollouts see exactly the prompts, matching and step accounting the grader uses.

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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from .env import AlfworldGame, Observation
from .prompts import INVALID_FEEDBACK, THOUGHT_FEEDBACK, build_messages, match_action, parse_reply

# generate(prompts) -> one reply per prompt: a string, or an object with .text (and .tokens)
Generate = Callable[[list[list[dict]]], list]


@dataclass
class EpisodeResult:
    game_id: str
    gamefile: str
    task_type: str
    task: str = ""
    won: bool = False
    steps: int = 0
    invalid_steps: int = 0       # replies that were not exactly an admissible command
    unmatched_steps: int = 0     # ...of which nothing admissible was close enough (no move made)
    thought_steps: int = 0
    tokens: int = 0
    trajectory: list[dict] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


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


class _Live:
    def __init__(self, item: dict):
        self.item = item
        self.game = AlfworldGame(item["gamefile"])
        self.result = EpisodeResult(game_id=str(item.get("id", item["gamefile"])), gamefile=item["gamefile"],
                                    task_type=item.get("task_type") or self.game.task_type)
        self.obs: Observation = self.game.reset()
        self.intro = self.obs.text
        self.result.task = self.game.task
        self.history: list[tuple[str, str]] = []


def run_episodes(generate: Generate, games: list[dict], *, max_steps: int = 30, batch_size: int = 16,
                 few_shot: bool = False, history_len: int = 5, match_threshold: float = 0.6,
                 log: Callable[[str], None] | None = None,
                 on_progress: Callable[[int, int], None] | None = None) -> list[EpisodeResult]:
    """Play every game once. All live episodes advance together: one `generate` call per step
    over up to `batch_size` episodes; a finished episode's slot goes to the next game."""
    results: dict[int, EpisodeResult] = {}
    pending = list(enumerate(games))
    live: dict[int, _Live] = {}

    def refill():
        while pending and len(live) < batch_size:
            idx, item = pending.pop(0)
            try:
                live[idx] = _Live(item)
            except Exception as exc:  # an unloadable game is a failed episode, not a crashed run
                results[idx] = EpisodeResult(game_id=str(item.get("id", item.get("gamefile"))),
                                             gamefile=str(item.get("gamefile")), task_type=item.get("task_type", ""),
                                             error=f"{type(exc).__name__}: {exc}")

    refill()
    while live:
        order = sorted(live)
        prompts = [build_messages(live[i].intro, live[i].history, live[i].obs.admissible,
                                  task_type=live[i].result.task_type, few_shot=few_shot,
                                  history_len=history_len) for i in order]
        replies = generate(prompts)
        if len(replies) != len(prompts):
            raise RuntimeError(f"generate returned {len(replies)} replies for {len(prompts)} prompts")
        for i, messages, reply in zip(order, prompts, replies):
            ep = live[i]
            res = ep.result
            tokens = getattr(reply, "tokens", None)
            if not isinstance(reply, str):      # a Completion-like object (text, tokens, finish_reason)
                reply = getattr(reply, "text", "") or ""
            res.tokens += tokens or 0
            thought, text = parse_reply(reply)
            command, exact = match_action(text, ep.obs.admissible, match_threshold)
            record = {"step": res.steps + 1, "observation": ep.obs.text, "admissible": ep.obs.admissible,
                      "prompt": messages[-1]["content"], "raw_output": reply, "thought": thought,
                      "command_text": text, "action": command, "exact": exact}
            try:
                if text is None and thought is not None:
                    res.thought_steps += 1
                    feedback, won = THOUGHT_FEEDBACK, False
                    history_cmd = f"think: {thought}"
                elif command is None:
                    res.invalid_steps += 1
                    res.unmatched_steps += 1
                    feedback, won = INVALID_FEEDBACK, False
                    history_cmd = (text or "").strip()[:80]
                else:
                    if not exact:
                        res.invalid_steps += 1
                    ep.obs = ep.game.step(command)
                    feedback, won = ep.obs.text, ep.obs.won
                    history_cmd = command
            except Exception as exc:
                res.error = f"{type(exc).__name__}: {exc}"
                feedback, won, history_cmd = "", False, command or ""
            res.steps += 1
            record.update(feedback=feedback, won=won)
            res.trajectory.append(record)
            ep.history.append((history_cmd, feedback))
            if won:
                res.won = True
            if won or res.error or res.steps >= max_steps:
                ep.game.close()
                results[i] = res
                del live[i]
                if log:
                    log(f"episode {res.game_id}: {'won' if res.won else 'lost'} in {res.steps} steps")
        if on_progress:
            on_progress(len(results), len(games))
        refill()
    return [results[i] for i in range(len(games))]

"""ALFWorld as an `InteractiveEnvironment` (grading/environments.py), registered as `alfworld`."""

from __future__ import annotations

from pathlib import Path

from autorl_tui.tasks.alfworld.api import list_games, run_episodes, run_react_episodes
from autorl_tui.tasks.alfworld.game import AlfworldGame
from autorl_tui.tasks.alfworld.prompts import messages_to_text
from autorl_tui.tasks.alfworld.react import ReactPromptsError, load_prompts

REACTS = ("none", "autorl-bench")


class AlfworldEnvironment:
    name = "alfworld"
    options = frozenset({"few_shot", "history_len", "match_threshold", "react", "react_prompts"})

    def validate_options(self, opts: dict) -> list[tuple[str, str]]:
        if opts.get("react", "none") not in REACTS:
            return [(f"alfworld: react {opts.get('react')!r}", f"use one of {', '.join(REACTS)}")]
        threshold = opts.get("match_threshold", 0.6)
        if not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
            return [(f"env_success: match_threshold {threshold!r} is not in [0, 1]",
                     "use a similarity ratio such as 0.6 (1 = exact commands only)")]
        return []

    def episodes(self, items: list[dict], split_path: Path) -> list[dict]:
        """Items carry gamefile paths relative to the split folder; without items, read its index."""
        if not items or not all("gamefile" in it for it in items):
            return [dict(g, split_path=str(split_path)) for g in list_games(split_path)]
        games = []
        for it in items:
            g = dict(it, split_path=str(split_path))
            path = Path(g["gamefile"])
            g["gamefile"] = str(path if path.is_absolute() else (split_path / path).resolve())
            games.append(g)
        return games

    def open(self, episode: dict) -> AlfworldGame:
        return AlfworldGame(episode["gamefile"])

    def run_episodes(self, generate, episodes, *, max_steps, batch_size, options, log, on_progress=None):
        if options.get("react") == "autorl-bench":
            try:
                prompts = load_prompts(options.get("react_prompts"), episodes[0].get("split_path") if episodes else None)
            except ReactPromptsError as exc:
                raise ValueError(str(exc)) from None
            return run_react_episodes(generate, episodes, prompts=prompts, max_steps=max_steps, batch_size=batch_size,
                                      log=log, on_progress=on_progress)
        return run_episodes(generate, episodes, max_steps=max_steps, batch_size=batch_size,
                            few_shot=bool(options.get("few_shot", False)),
                            history_len=int(options.get("history_len", 5)),
                            match_threshold=float(options.get("match_threshold", 0.6)), log=log,
                            on_progress=on_progress)

    def to_text(self, messages: list[dict]) -> str:
        if messages and messages[-1].get("completion"):     # AutoRL-Bench's protocol: the text itself
            return messages[-1]["content"]
        return messages_to_text(messages)

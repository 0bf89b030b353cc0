"""WebShop as an `InteractiveEnvironment` (grading/environments.py), registered as `webshop`."""

from __future__ import annotations

from pathlib import Path

from autorl_tui.tasks.webshop.api import (PROMPTS, list_episodes, open_episode, run_episodes, summarize_rewards,
                                          with_paths)
from autorl_tui.tasks.webshop.prompts import messages_to_text
from autorl_tui.tasks.webshop.shop import ShopEpisode
from autorl_tui.tasks.webshop.webagent import SessionEpisode


class WebshopEnvironment:
    name = "webshop"
    options = frozenset({"history_len", "success_at", "prompt"})

    def validate_options(self, opts: dict) -> list[tuple[str, str]]:
        problems = []
        h = opts.get("history_len", 8)
        if not isinstance(h, int) or isinstance(h, bool) or h < 0:
            problems.append((f"env_success: history_len {h!r} is not a whole number >= 0",
                             "use the number of previous actions shown in the prompt, such as 8"))
        at = opts.get("success_at", 1.0)
        if isinstance(at, bool) or not isinstance(at, (int, float)) or not 0 < at <= 1:
            problems.append((f"env_success: success_at {at!r} is not a reward in (0, 1]",
                             "use 1.0 (a purchase that meets the whole goal) or 0.5 (AutoRL-Bench's success)"))
        if opts.get("prompt", "chat") not in PROMPTS:
            problems.append((f"env_success: prompt {opts.get('prompt')!r} is not one of {', '.join(PROMPTS)}",
                             "use chat (our prompt) or autorl-bench (AutoRL-Bench's, for WebShop sessions)"))
        return problems

    def episodes(self, items: list[dict], split_path: Path) -> list[dict]:
        """Items name their catalog relative to the split folder; without items, read its index."""
        if not items:
            return list_episodes(split_path)
        return [with_paths(it, Path(split_path)) for it in items]

    def open(self, episode: dict) -> ShopEpisode | SessionEpisode:
        return open_episode(episode)

    def run_episodes(self, generate, episodes, *, max_steps, batch_size, options, log, on_progress=None):
        records = run_episodes(generate, episodes, max_steps=max_steps, batch_size=batch_size,
                               history_len=int(options.get("history_len", 8)), log=log, on_progress=on_progress,
                               prompt=str(options.get("prompt", "chat")))
        at = float(options.get("success_at", 1.0))
        for r in records:        # won = a purchase's reward reaches `success_at` (AutoRL-Bench: 0.5)
            r.won = r.error is None and r.reward >= at - 1e-9
        return records

    def summary_metrics(self, records) -> dict:
        """Mean reward (0-100), the share with reward >= 0.5 (AutoRL-Bench's success) and the share with
        reward 1.0 (WebShop's paper's success rate), whatever `success_at` makes the score."""
        return summarize_rewards(records)

    def to_text(self, messages: list[dict]) -> str:
        return messages_to_text(messages)

"""Play WebShop episodes with a language-model policy: the batched episode runner.

Standalone (relative imports; standard library and bm25s): the grader's `env_success` scorer uses
it, and the same files are copied into the agent's workspace as the `webshop_api` package, so an
agent's online rollouts see exactly the prompts, parsing, step accounting and rewards the grader
uses.

    import sys; sys.path.insert(0, os.environ["DATA_PATH"])
    from webshop_api import list_episodes, run_episodes
    episodes = list_episodes()                       # the train instructions in DATA_PATH
    results = run_episodes(my_generate, episodes[:16], max_steps=15)
    # my_generate(list_of_chat_message_lists) -> list of reply strings

Each result has `reward` (0-1), `won` (reward 1.0), `steps` and the full `trajectory`
(page, prompt, raw reply, action, feedback, reward per step): material for SFT, rejection
sampling, or GRPO rewards.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from .prompts import INVALID_FEEDBACK, build_messages, parse_reply
from .shop import ShopEpisode, shop_for

Generate = Callable[[list[list[dict]]], list]


@dataclass
class EpisodeResult:
    game_id: str
    gamefile: str
    task_type: str
    task: str = ""
    won: bool = False
    reward: float = 0.0
    bought: str | None = None
    steps: int = 0
    invalid_steps: int = 0       # replies that were not a valid action on the page
    unmatched_steps: int = 0     # ...of which no action could be read at all
    thought_steps: int = 0
    tokens: int = 0
    trajectory: list[dict] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def list_episodes(data_path: str | os.PathLike | None = None, category: str | None = None) -> list[dict]:
    """The instructions of a split folder (default: $DATA_PATH), each with its catalog's path."""
    root = Path(data_path or os.environ.get("DATA_PATH") or ".")
    index = root / "items.jsonl"
    if not index.exists():
        raise FileNotFoundError(f"{index} not found: pass the folder holding items.jsonl (the task's data folder)")
    out = []
    for line in index.read_text().splitlines():
        if line.strip():
            item = json.loads(line)
            item["catalog"] = str((root / item.get("catalog", "catalog.jsonl")).resolve())
            if category is None or item.get("category") == category:
                out.append(item)
    return out


def open_episode(item: dict) -> ShopEpisode:
    return ShopEpisode(shop_for(item["catalog"]), item)


class _Live:
    def __init__(self, item: dict):
        self.episode = open_episode(item)
        self.result = EpisodeResult(game_id=str(item["id"]), gamefile=f"{item['catalog']}#{item['id']}",
                                    task_type=item.get("category", ""), task=item["instruction"])
        self.obs = self.episode.reset()
        self.history: list[str] = []


def run_episodes(generate: Generate, episodes: list[dict], *, max_steps: int = 15, batch_size: int = 16,
                 history_len: int = 8, log: Callable[[str], None] | None = None,
                 on_progress: Callable[[int, int], None] | None = None) -> list[EpisodeResult]:
    """Play every episode once; all live episodes advance together, one `generate` call per step."""
    results: dict[int, EpisodeResult] = {}
    pending = list(enumerate(episodes))
    live: dict[int, _Live] = {}

    def refill():
        while pending and len(live) < batch_size:
            idx, item = pending.pop(0)
            try:
                live[idx] = _Live(item)
            except Exception as exc:  # an unloadable episode is a failed one, not a crashed run
                results[idx] = EpisodeResult(game_id=str(item.get("id")), gamefile=str(item.get("catalog")),
                                             task_type=item.get("category", ""), error=f"{type(exc).__name__}: {exc}")

    refill()
    while live:
        order = sorted(live)
        prompts = [build_messages(live[i].obs.text, live[i].history, live[i].obs.admissible, history_len)
                   for i in order]
        replies = generate(prompts)
        if len(replies) != len(prompts):
            raise RuntimeError(f"generate returned {len(replies)} replies for {len(prompts)} prompts")
        for i, messages, reply in zip(order, prompts, replies):
            ep = live[i]
            res = ep.result
            tokens = getattr(reply, "tokens", None)
            if not isinstance(reply, str):
                reply = getattr(reply, "text", "") or ""
            res.tokens += tokens or 0
            action = parse_reply(reply)
            record = {"step": res.steps + 1, "observation": ep.obs.text, "admissible": ep.obs.admissible,
                      "prompt": messages[-1]["content"], "raw_output": reply, "action": action}
            try:
                if action is None:
                    res.invalid_steps += 1
                    res.unmatched_steps += 1
                    feedback = INVALID_FEEDBACK
                else:
                    ep.obs = ep.episode.step(action)
                    if not ep.obs.valid:
                        res.invalid_steps += 1
                    feedback = ep.obs.text if ep.obs.valid else INVALID_FEEDBACK
            except Exception as exc:
                res.error = f"{type(exc).__name__}: {exc}"
                feedback = ""
            res.steps += 1
            ep.history.append(action if action and ep.obs.valid else f"{(action or reply.strip())[:60]} (invalid)")
            record.update(feedback=feedback, reward=ep.obs.reward, won=ep.obs.won)
            res.trajectory.append(record)
            if ep.obs.done:
                res.reward, res.won = ep.obs.reward, ep.obs.won
                res.bought = ep.obs.info.get("asin")
            if ep.obs.done or res.error or res.steps >= max_steps:
                ep.episode.close()
                results[i] = res
                del live[i]
                if log:
                    log(f"episode {res.game_id}: reward {res.reward:.2f} in {res.steps} steps")
        if on_progress:
            on_progress(len(results), len(episodes))
        refill()
    return [results[i] for i in range(len(episodes))]


def summarize_rewards(results: list[EpisodeResult]) -> dict:
    """WebShop's figures beside the success rate: mean reward (0-100) and the share with reward >= 0.5."""
    n = len(results)
    return {"mean_reward": 100.0 * sum(r.reward for r in results) / n if n else 0.0,
            "reward_ge_0.5": 100.0 * sum(r.reward >= 0.5 for r in results) / n if n else 0.0}

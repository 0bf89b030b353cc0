"""Play WebShop episodes with a language-model policy: the batched episode runner.

WebShop's hooks (episode, prompt, reply parsing) for the generic batched runner (`episodes.py`, the
grader's `autorl_tui/grading/episodes.py`). Standalone (relative imports; standard library and
bm25s): the grader's `env_success` scorer uses it, and the same files (with the generic runner as
`episodes.py`) are copied into the agent's workspace as the `webshop_api` package, so an
agent's online rollouts see exactly the prompts, parsing, step accounting and rewards the grader
uses.

    import sys; sys.path.insert(0, os.environ["DATA_PATH"])
    from webshop_api import list_episodes, run_episodes
    episodes = list_episodes()                       # the train instructions in DATA_PATH
    results = run_episodes(my_generate, episodes[:16], max_steps=15)
    # my_generate(list_of_chat_message_lists) -> list of reply strings

Each result has `reward` (the purchase's, 0-1), `won` (reward 1.0), `steps` and the full
`trajectory` (page, prompt, raw reply, action, feedback per step): material for SFT, rejection
sampling, or GRPO rewards.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

from .episodes import EpisodeRecord, EpisodeState, Generate, Parsed
from .episodes import run_episodes as run_generic
from .prompts import INVALID_FEEDBACK, build_messages, parse_reply
from .react_prompt import build_messages as react_messages
from .shop import ShopEpisode, shop_for
from .webagent import SessionEpisode, SessionObservation, is_valid, session_reply, shop_at

EpisodeResult = EpisodeRecord   # the name agents' code imports
__all__ = ["EpisodeResult", "Generate", "list_episodes", "open_episode", "run_episodes", "summarize_rewards"]


def list_episodes(data_path: str | os.PathLike | None = None, category: str | None = None) -> list[dict]:
    """The instructions of a split folder (default: $DATA_PATH), each with its catalog's path."""
    root = Path(data_path or os.environ.get("DATA_PATH") or ".")
    index = root / "items.jsonl"
    if not index.exists():
        raise FileNotFoundError(f"{index} not found: pass the folder holding items.jsonl (the task's data folder)")
    out = []
    for line in index.read_text().splitlines():
        if line.strip():
            item = with_paths(json.loads(line), root)
            if category is None or item.get("category") == category:
                out.append(item)
    return out


def with_paths(item: dict, root: Path) -> dict:
    """The item with its catalog's (a session's: its shop data folder's) absolute path, and the
    runner's `gamefile` and `task_type`."""
    item = dict(item)
    if "session" in item:          # a WebShop session (webagent.py): the official files in `shop`
        shop = Path(item.get("shop", "webshop_data"))
        item["shop"] = str(shop if shop.is_absolute() else (Path(root) / shop).resolve())
        item.setdefault("gamefile", f"{item['shop']}#session-{item['session']}")
        item.setdefault("task_type", item.get("category", ""))
        return item
    catalog = Path(item.get("catalog", "catalog.jsonl"))
    item["catalog"] = str(catalog if catalog.is_absolute() else (Path(root) / catalog).resolve())
    item.setdefault("gamefile", f"{item['catalog']}#{item['id']}")
    item.setdefault("task_type", item.get("category", ""))
    return item


def open_episode(item: dict) -> ShopEpisode | SessionEpisode:
    if "session" in item:
        shop = shop_at(item["shop"], item.get("num_products", 1000), int(item.get("price_seed", 0)))
        return SessionEpisode(shop, int(item["session"]))
    return ShopEpisode(shop_for(item["catalog"]), item)


def _valid_on_page(action: str, obs) -> bool:
    if isinstance(obs, SessionObservation):          # WebShop's rules: a search from any page
        return is_valid(action, obs.admissible)
    return action in obs.admissible or (action.startswith("search[") and obs.admissible == ["search[...]"])


PROMPTS = ("chat", "autorl-bench")


def run_episodes(generate: Generate, episodes: list[dict], *, max_steps: int = 15, batch_size: int = 16,
                 history_len: int = 8, log: Callable[[str], None] | None = None,
                 on_progress: Callable[[int, int], None] | None = None, prompt: str = "chat") -> list[EpisodeRecord]:
    """Play every episode once; all live episodes advance together, one `generate` call per step.
    An action the page does not offer is stepped (the page stays, the step is spent) and counted
    invalid; a reply with no `search[...]`/`click[...]` is also unmatched (no move). `prompt`:
    `chat` (prompts.py: the last `history_len` actions) or `autorl-bench` (react_prompt.py, for
    sessions: AutoRL-Bench's prompt with the last `history_len` observation/action pairs)."""

    def build_prompt(state: EpisodeState) -> list[dict]:
        if prompt == "autorl-bench" and isinstance(state.episode, SessionEpisode):   # human goals: chat
            heading = state.episode.env.instruction_text()
            return react_messages(heading, state.history, state.obs.text, state.obs.admissible, history_len)
        return build_messages(state.obs.text, [a for a, _ in state.history], state.obs.admissible, history_len)

    def parse(reply: str, obs) -> Parsed:
        if isinstance(obs, SessionObservation):      # WebShop reads the action itself, verbatim
            verbatim = session_reply(reply)
            return Parsed(action=verbatim, exact=is_valid(verbatim, obs.admissible), text=verbatim[:80])
        action = parse_reply(reply)
        if action is None:
            return Parsed(action=None, exact=False, text=(reply or "").strip()[:80] or None)
        return Parsed(action=action, exact=_valid_on_page(action, obs), text=action)

    return run_generic(generate, episodes, open_episode=open_episode, build_prompt=build_prompt,
                       parse_reply=parse, max_steps=max_steps, batch_size=batch_size,
                       invalid_feedback=INVALID_FEEDBACK, log=log, on_progress=on_progress)


def summarize_rewards(results: list[EpisodeRecord]) -> dict:
    """WebShop's figures beside the success rate: mean reward (0-100), the share with reward >= 0.5 and
    the share with reward 1.0."""
    n = len(results)
    return {"mean_reward": 100.0 * sum(r.reward for r in results) / n if n else 0.0,
            "reward_ge_0.5": 100.0 * sum(r.reward >= 0.5 for r in results) / n if n else 0.0,
            "reward_eq_1": 100.0 * sum(r.reward >= 1.0 - 1e-9 for r in results) / n if n else 0.0}

"""Play DeepSearchQA questions with a language-model policy: the batched episode runner.

No harness imports (the search backend needs `bm25s` for the local index): the grader's scorer
uses it, and the same files are copied into the agent's workspace as the `deepsearchqa_api`
package, so an agent's rollouts see exactly the grader's prompts, tools and step accounting.

    import sys; sys.path.insert(0, os.environ["DATA_PATH"])
    from deepsearchqa_api import list_questions, open_backend, run_episodes
    questions = list_questions()                  # the train questions in DATA_PATH
    results = run_episodes(my_generate, questions[:8], backend=open_backend(), max_steps=12)
    # my_generate(list_of_chat_message_lists) -> list of reply strings

Each result has `won` (answer correct), `answer`, `answer_score` (em, f1, precision, recall),
`steps` and the full `trajectory` (prompt, raw reply, action, tool output per step).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from .env import PAGE_CHARS, SearchEpisode
from .prompts import INVALID_FEEDBACK, THOUGHT_FEEDBACK, build_messages, format_action, parse_reply
from .search import HttpSearch, LocalIndex

Generate = Callable[[list[list[dict]]], list]


@dataclass
class EpisodeResult:
    game_id: str
    gamefile: str
    task_type: str
    task: str = ""
    won: bool = False
    steps: int = 0
    invalid_steps: int = 0       # replies holding no well-formed action
    unmatched_steps: int = 0     # (the same here: a free-form action has nothing to match)
    thought_steps: int = 0
    tokens: int = 0
    trajectory: list[dict] = field(default_factory=list)
    error: str | None = None
    answer: str | None = None
    answer_score: dict | None = None
    reward: float = 0.0
    searches: int = 0
    opens: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def _root(data_path) -> Path:
    return Path(data_path or os.environ.get("DATA_PATH") or ".")


def list_questions(data_path: str | os.PathLike | None = None) -> list[dict]:
    """The questions of a split folder (default: $DATA_PATH), from its items.jsonl."""
    index = _root(data_path) / "items.jsonl"
    if not index.exists():
        raise FileNotFoundError(f"{index} not found: pass the folder holding items.jsonl (the task's data folder)")
    return [json.loads(line) for line in index.read_text().splitlines() if line.strip()]


def load_corpus(data_path: str | os.PathLike | None = None) -> list[dict]:
    path = _root(data_path) / "corpus.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def open_backend(data_path: str | os.PathLike | None = None, search_url: str | None = None):
    """An HTTP search endpoint when a URL is given, else the BM25 index of the split's corpus."""
    if search_url:
        return HttpSearch(search_url)
    docs = load_corpus(data_path)
    if not docs:
        raise FileNotFoundError(f"no corpus.jsonl in {_root(data_path)} and no search URL: these questions need a "
                                "search endpoint (set DEEPSEARCHQA_SEARCH_URL or scorer_options.search_url)")
    return LocalIndex(docs)


class _Live:
    def __init__(self, item: dict, backend, k: int, page_chars: int, grade, reward: str):
        self.ep = SearchEpisode(item, backend, k=k, page_chars=page_chars, grade=grade, reward=reward)
        self.obs = self.ep.reset()
        self.result = EpisodeResult(game_id=str(item["id"]), gamefile=str(item.get("source", "")),
                                    task_type=item.get("question_type", ""), task=item["question"])
        self.history: list[tuple[str, str]] = []


def run_episodes(generate: Generate, questions: list[dict], *, backend, max_steps: int = 12, batch_size: int = 16,
                 history_len: int = 4, k: int = 5, page_chars: int = PAGE_CHARS, grade=None, reward: str = "correct",
                 log: Callable[[str], None] | None = None,
                 on_progress: Callable[[int, int], None] | None = None) -> list[EpisodeResult]:
    """Play every question once. All live episodes advance together: one `generate` call per step
    over up to `batch_size` episodes; a finished episode's slot goes to the next question. An
    episode ends at its answer, at `max_steps`, or at an error of the search backend."""
    results: dict[int, EpisodeResult] = {}
    pending = list(enumerate(questions))
    live: dict[int, _Live] = {}

    def refill():
        while pending and len(live) < batch_size:
            idx, item = pending.pop(0)
            live[idx] = _Live(item, backend, k, page_chars, grade, reward)

    refill()
    while live:
        order = sorted(live)
        prompts = [build_messages(live[i].result.task, live[i].history, step=live[i].result.steps + 1,
                                  max_steps=max_steps, history_len=history_len) for i in order]
        replies = generate(prompts)
        if len(replies) != len(prompts):
            raise RuntimeError(f"generate returned {len(replies)} replies for {len(prompts)} prompts")
        for i, messages, reply in zip(order, prompts, replies):
            lv = live[i]
            res = lv.result
            tokens = getattr(reply, "tokens", None)
            if not isinstance(reply, str):
                reply = getattr(reply, "text", "") or ""
            res.tokens += tokens or 0
            thought, parsed = parse_reply(reply)
            action = format_action(*parsed) if parsed else None
            record = {"step": res.steps + 1, "observation": lv.obs.text, "prompt": messages[-1]["content"],
                      "raw_output": reply, "thought": thought, "action": action}
            obs = None
            try:
                if parsed is None and thought is not None:
                    res.thought_steps += 1
                    feedback, shown = THOUGHT_FEEDBACK, f"think: {thought}"
                elif parsed is None:
                    res.invalid_steps += 1
                    res.unmatched_steps += 1
                    feedback, shown = INVALID_FEEDBACK, (reply or "").strip()[:80]
                else:
                    res.searches += parsed[0] == "search"
                    res.opens += parsed[0] == "open"
                    obs = lv.ep.step(action)
                    feedback, shown = obs.text, action
            except Exception as exc:       # a search endpoint that fails ends this episode, not the run
                res.error = f"{type(exc).__name__}: {exc}"
                feedback, shown = "", action or ""
            res.steps += 1
            record["feedback"] = feedback
            if obs is not None and obs.done:
                res.won, res.answer, res.answer_score, res.reward = obs.won, obs.answer, obs.answer_score, obs.reward
                record.update(won=obs.won, answer_score=obs.answer_score)
            res.trajectory.append(record)
            lv.history.append((shown, feedback))
            if (obs is not None and obs.done) or res.error or res.steps >= max_steps:
                lv.ep.close()
                results[i] = res
                del live[i]
                if log:
                    log(f"episode {res.game_id}: {'right' if res.won else 'wrong'} in {res.steps} steps")
        if on_progress:
            on_progress(len(results), len(questions))
        refill()
    return [results[i] for i in range(len(questions))]

"""Play DeepSearchQA questions with a language-model policy: DeepSearchQA's hooks for the generic
batched episode runner (`episodes.py`, the grader's `autorl_tui/grading/episodes.py`).

No harness imports (the local index needs the `bm25s` package): the grader's scorer uses it, and
the same files (with the generic runner as `episodes.py`) are copied into the agent's workspace
as the `deepsearchqa_api` package, so an agent's rollouts see exactly the grader's prompts, tools
and step accounting.

    import sys; sys.path.insert(0, os.environ["DATA_PATH"])
    from deepsearchqa_api import list_questions, open_backend, run_episodes
    questions = list_questions()                  # the train questions in DATA_PATH
    results = run_episodes(my_generate, questions[:8], backend=open_backend(), max_steps=12)
    # my_generate(list_of_chat_message_lists) -> list of reply strings

Each result has `won` (answer correct), `reward`, `steps` and the full `trajectory` (prompt, raw
reply, action, tool output per step); the answering step also holds `answer` and `answer_score`
(correct, em, f1, precision, recall).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

from .tool_loop import PAGE_CHARS, SearchEpisode
from .episodes import EpisodeRecord, EpisodeState, Generate, Parsed
from .episodes import run_episodes as run_generic
from .prompts import INVALID_FEEDBACK, THOUGHT_FEEDBACK, build_messages, format_action, parse_reply
from .react import MAX_STEPS as REACT_MAX_STEPS, ReactSearchEpisode, two_call_generate
from .react import parse as react_parse
from .search import DuckDuckGoSearch, HttpSearch, LocalIndex, SerpApiSearch

EpisodeResult = EpisodeRecord   # the name agents' code imports
__all__ = ["EpisodeResult", "Generate", "list_questions", "load_corpus", "open_backend", "run_episodes",
           "run_react_episodes"]


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


SEARCH_BACKENDS = ("searxng", "serpapi", "duckduckgo", "autorl-bench")


def open_backend(data_path: str | os.PathLike | None = None, search_url: str | None = None,
                 search_backend: str = "searxng", serpapi_key_env: str = "SERPAPI_KEY"):
    """The search behind the tool: `searxng` (the default) = a SearXNG-style endpoint when a URL is
    given, else the BM25 index of the split's corpus; `serpapi` (key in $SERPAPI_KEY) or `duckduckgo`
    at their public endpoints or at `search_url`; `autorl-bench` = as AutoRL-Bench chooses: SerpAPI
    when the key is set, else DuckDuckGo."""
    key = os.environ.get(serpapi_key_env or "SERPAPI_KEY") or ""
    if search_backend == "autorl-bench":
        search_backend = "serpapi" if key else "duckduckgo"
    if search_backend == "serpapi":
        if not key:
            raise ValueError(f"search_backend serpapi needs a SerpAPI key: set ${serpapi_key_env}")
        return SerpApiSearch(key, search_url)
    if search_backend == "duckduckgo":
        return DuckDuckGoSearch(search_url)
    if search_backend != "searxng":
        raise ValueError(f"unknown search_backend {search_backend!r}: use one of {', '.join(SEARCH_BACKENDS)}")
    if search_url:
        return HttpSearch(search_url)
    docs = load_corpus(data_path)
    if not docs:
        raise FileNotFoundError(f"no corpus.jsonl in {_root(data_path)} and no search URL: these questions need a "
                                "search endpoint (set DEEPSEARCHQA_SEARCH_URL or scorer_options.search_url)")
    return LocalIndex(docs)


def parse(reply: str, obs=None) -> Parsed:
    """A reply as the generic runner's Parsed: the first well-formed action, or a thought, or nothing."""
    thought, action = parse_reply(reply)
    text = format_action(*action) if action else None
    if text is None and thought is None:
        return Parsed(action=None, exact=False, text=(reply or "").strip()[:80])
    return Parsed(action=text, exact=True, thought=thought, text=text)


def run_episodes(generate: Generate, questions: list[dict], *, backend, max_steps: int = 12, batch_size: int = 16,
                 history_len: int = 4, k: int = 5, page_chars: int = PAGE_CHARS, grade=None, reward: str = "correct",
                 tools: str = "default", log: Callable[[str], None] | None = None,
                 on_progress: Callable[[int, int], None] | None = None) -> list[EpisodeResult]:
    """Play every question once, batched (one `generate` call per step over up to `batch_size`
    episodes). An episode ends at its answer, at `max_steps`, or when the search backend fails."""
    episodes: dict[str, SearchEpisode] = {}

    def open_episode(item: dict) -> SearchEpisode:
        ep = episodes[str(item["id"])] = SearchEpisode(item, backend, k=k, page_chars=page_chars, grade=grade,
                                                       reward=reward, tools=tools)
        return ep

    def build_prompt(state: EpisodeState) -> list[dict]:
        return build_messages(state.record.task, state.history, step=state.record.steps + 1, max_steps=max_steps,
                              history_len=history_len)

    records = run_generic(generate, questions, open_episode=open_episode, build_prompt=build_prompt,
                          parse_reply=parse, max_steps=max_steps, batch_size=batch_size,
                          thought_feedback=THOUGHT_FEEDBACK, invalid_feedback=INVALID_FEEDBACK, log=log,
                          on_progress=on_progress)
    return _with_answers(records, episodes)


def _with_answers(records: list[EpisodeResult], episodes: dict) -> list[EpisodeResult]:
    for rec in records:        # the answer and its scores, on the step that gave it
        ep = episodes.get(rec.game_id)
        if ep is not None and ep.last_answer is not None and rec.trajectory:
            rec.trajectory[-1].update(answer=ep.last_answer, answer_score=ep.last_score)
    return records


def run_react_episodes(generate, questions: list[dict], *, backend, max_steps: int = REACT_MAX_STEPS,
                       batch_size: int = 16, grade=None, reward: str = "correct",
                       log: Callable[[str], None] | None = None,
                       on_progress: Callable[[int, int], None] | None = None) -> list[EpisodeResult]:
    """Play every question under AutoRL-Bench's protocol (react.py): `generate` gets one message
    per episode whose `content` is the whole text to complete (marked `completion: True`), and is
    called a second time per step, as `generate(prompts, stop=["]"], max_tokens=128)`, for the
    replies that held no action (it must take those two keywords)."""
    episodes: dict[str, ReactSearchEpisode] = {}

    def open_episode(item: dict) -> ReactSearchEpisode:
        ep = episodes[str(item["id"])] = ReactSearchEpisode(item, backend, grade=grade, reward=reward,
                                                            max_steps=max_steps)
        return ep

    def build_prompt(state: EpisodeState) -> list[dict]:
        return [{"role": "user", "completion": True, "content": state.episode.text}]

    records = run_generic(two_call_generate(generate), questions, open_episode=open_episode,
                          build_prompt=build_prompt, parse_reply=react_parse, max_steps=max_steps,
                          batch_size=batch_size, log=log, on_progress=on_progress)
    return _with_answers(records, episodes)

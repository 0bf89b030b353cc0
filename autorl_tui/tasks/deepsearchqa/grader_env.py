"""DeepSearchQA as an `InteractiveEnvironment` (grading/environments.py), registered as `deepsearchqa`."""

from __future__ import annotations

import os
from pathlib import Path

import re

from autorl_tui.tasks.deepsearchqa.api import SEARCH_BACKENDS, list_questions, open_backend, run_episodes, run_react_episodes
from autorl_tui.tasks.deepsearchqa.tool_loop import TOOLS, SearchEpisode
from autorl_tui.tasks.deepsearchqa.judging import SCORINGS, AnswerGrader
from autorl_tui.tasks.deepsearchqa.prompts import messages_to_text
from autorl_tui.tasks.deepsearchqa.react import FORCED_STOP

SEARCH_URL_ENV = "DEEPSEARCHQA_SEARCH_URL"
REACTS = ("none", "autorl-bench")
_BARE_ACTION = re.compile(r"(search|answer)\[.*\]", re.S)


def search_url(options: dict) -> str | None:
    return options.get("search_url") or os.environ.get(SEARCH_URL_ENV) or None


class DeepSearchQAEnvironment:
    name = "deepsearchqa"
    options = frozenset({"history_len", "top_k", "page_chars", "search_url", "reward", "answer_scoring",
                         "judge_model", "judge_url", "api_key_env", "judge_timeout_s", "cache_path", "tools",
                         "search_backend", "serpapi_key_env", "react"})

    def __init__(self):
        self._backends: dict = {}

    def validate_options(self, opts: dict) -> list[tuple[str, str]]:
        problems = []
        for key, low in (("history_len", 0), ("top_k", 1), ("page_chars", 100)):
            v = opts.get(key)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < low):
                problems.append((f"deepsearchqa: {key} {v!r} is not an integer >= {low}", f"set {key} to e.g. {max(low, 4)}"))
        if opts.get("reward", "correct") not in ("correct", "f1"):
            problems.append((f"deepsearchqa: reward {opts.get('reward')!r}", "use correct (1/0) or f1"))
        if opts.get("answer_scoring", "string_match") not in SCORINGS:
            problems.append((f"deepsearchqa: answer_scoring {opts.get('answer_scoring')!r}",
                             "use string_match, judge (with judge_model and judge_url) or autorl-bench"))
        if opts.get("react", "none") not in REACTS:
            problems.append((f"deepsearchqa: react {opts.get('react')!r}", f"use one of {', '.join(REACTS)}"))
        if opts.get("tools", "default") not in TOOLS:
            problems.append((f"deepsearchqa: tools {opts.get('tools')!r}", f"use one of {', '.join(TOOLS)}"))
        if opts.get("search_backend", "searxng") not in SEARCH_BACKENDS:
            problems.append((f"deepsearchqa: search_backend {opts.get('search_backend')!r}",
                             f"use one of {', '.join(SEARCH_BACKENDS)}"))
        return problems

    def backend(self, split_path: Path, options: dict):
        key = (str(split_path), search_url(options), options.get("search_backend", "searxng"),
               options.get("serpapi_key_env", "SERPAPI_KEY"))
        if key not in self._backends:
            self._backends[key] = open_backend(split_path, *key[1:])
        return self._backends[key]

    def episodes(self, items: list[dict], split_path: Path) -> list[dict]:
        items = items or list_questions(split_path)
        return [dict(it, split_path=str(split_path)) for it in items]

    def open(self, episode: dict, options: dict | None = None) -> SearchEpisode:
        options = options or {}
        return SearchEpisode(episode, self.backend(Path(episode["split_path"]), options),
                             k=int(options.get("top_k", 5)), page_chars=int(options.get("page_chars", 400)),
                             grade=AnswerGrader(options), reward=options.get("reward", "correct"),
                             tools=options.get("tools", "default"))

    def run_episodes(self, generate, episodes, *, max_steps, batch_size, options, log, on_progress=None):
        if not episodes:
            return []
        backend = self.backend(Path(episodes[0]["split_path"]), options)
        if options.get("react") == "autorl-bench":
            return run_react_episodes(generate, episodes, backend=backend, max_steps=max_steps,
                                      batch_size=batch_size, grade=AnswerGrader(options),
                                      reward=options.get("reward", "correct"), log=log, on_progress=on_progress)
        return run_episodes(generate, episodes, backend=backend, max_steps=max_steps, batch_size=batch_size,
                            history_len=int(options.get("history_len", 4)), k=int(options.get("top_k", 5)),
                            page_chars=int(options.get("page_chars", 400)), grade=AnswerGrader(options),
                            reward=options.get("reward", "correct"), tools=options.get("tools", "default"),
                            log=log, on_progress=on_progress)

    def to_text(self, messages: list[dict]) -> str:
        if messages and messages[-1].get("completion"):     # AutoRL-Bench's protocol: the text itself
            return messages[-1]["content"]
        return messages_to_text(messages)

    def replay_reply(self, action: str, options: dict, stop: list[str] | None = None) -> str:
        """What a model writes to take `action` (`search[q]`, `answer[x]`) under the options'
        protocol, for `autorl-tui score --episodes`: under AutoRL-Bench's loop a bare tool call
        becomes `Action: search[q]`; anything else (a whole model turn), and the reply to the
        loop's forced `answer[` (stop "]"), is kept as written."""
        if (options.get("react") == "autorl-bench" and stop != FORCED_STOP
                and _BARE_ACTION.fullmatch(action.strip())):
            return f"Action: {action.strip()}"
        return action

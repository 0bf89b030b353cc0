"""One DeepSearchQA episode: a question, a search backend and a step-by-step tool loop.

Standard library only (the backend is passed in); copied into the agent's workspace. `reset()`
shows the question; `step(action)` takes a canonical action string (`search[q]`, `open[id]`,
`open[id#2]`, `answer[text]`) and returns what the tool returned. `answer` ends the episode:
`won` when the answer is correct, `reward` its score (1/0 by default; see `reward="f1"`).

`tools="autorl-bench"`: AutoRL-Bench's two tools only, `search[q]` and `answer[text]`; a search
shows the hits' snippets joined by " | " (or "No results found."; a failed search "Search error:
..."), and `answer[your final answer]` (its prompt's placeholder) is refused and the episode goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .prompts import INVALID_FEEDBACK
from .scoring import score_answer

PAGE_CHARS = 400
TOOLS = ("default", "autorl-bench")
PLACEHOLDER = "your final answer"
PLACEHOLDER_FEEDBACK = "That is not a valid answer. Please think again."


@dataclass
class Observation:
    text: str
    admissible: list[str] = field(default_factory=list)    # free-form actions: none listed
    won: bool = False
    moves: int = 0
    reward: float = 0.0
    done: bool = False
    answer: str | None = None
    answer_score: dict | None = None


def pages(text: str, size: int = PAGE_CHARS) -> list[str]:
    """The text cut into pages of about `size` characters, at word boundaries."""
    out, cur = [], ""
    for word in text.split(" "):
        if cur and len(cur) + 1 + len(word) > size:
            out.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    if cur or not out:
        out.append(cur)
    return out


class SearchEpisode:
    task_type: str

    def __init__(self, item: dict, backend, *, k: int = 5, page_chars: int = PAGE_CHARS,
                 grade: Callable[[str, dict], dict] | None = None, reward: str = "correct", tools: str = "default"):
        self.item = item
        self.tools = tools
        self.backend = backend
        self.k = k
        self.page_chars = page_chars
        self.grade = grade or (lambda pred, it: score_answer(pred, it["answers"], it.get("answer_type", "single")))
        self.reward_kind = reward
        self.task = item["question"]
        self.task_type = item.get("question_type", "")
        self.moves = 0
        self.done = False
        self.last_answer: str | None = None    # the answer given and its scores, once answered
        self.last_score: dict | None = None

    def reset(self) -> Observation:
        self.moves = 0
        self.done = False
        self.last_answer = self.last_score = None
        return Observation(text=f"Question: {self.task}")

    def _search(self, query: str) -> str:
        if not query:
            return "Empty query: write search[some words]."
        hits = self.backend.search(query, self.k)
        if not hits:
            return f"No results for {query!r}."
        return "\n".join(f"[{h['doc_id']}] {h['title']}: {h['snippet']}" for h in hits)

    def _snippets(self, query: str) -> str:
        try:
            hits = self.backend.search(query, self.k)
        except Exception as exc:   # AutoRL-Bench's tool reports any failure as its observation
            return f"Search error: {exc}"
        return " | ".join(h["snippet"] for h in hits) or "No results found."

    def _open(self, ref: str) -> str:
        doc_id, _, page = ref.partition("#")
        doc_id = doc_id.strip()
        try:
            n = int(page) if page.strip() else 1
        except ValueError:
            return f"Bad page {page!r}: write open[{doc_id}#2] for page 2."
        text = self.backend.get(doc_id)
        if text is None and doc_id != doc_id.upper():
            text = self.backend.get(doc_id.upper())
        if text is None:
            return f"No document {doc_id!r}. Use a document id from the search results, e.g. open[D0001]."
        parts = pages(text, self.page_chars)
        if not 1 <= n <= len(parts):
            return f"{doc_id} has {len(parts)} page(s)."
        more = f"\n(page {n} of {len(parts)}; open[{doc_id}#{n + 1}] for more)" if n < len(parts) else \
            (f"\n(page {n} of {len(parts)})" if len(parts) > 1 else "")
        return parts[n - 1] + more

    def step(self, action: str) -> Observation:
        if self.done:
            raise RuntimeError("the episode is over; call reset()")
        self.moves += 1
        tool, _, rest = action.partition("[")
        tool, arg = tool.strip().lower(), rest[:-1].strip() if rest.endswith("]") else None
        allowed = ("search", "answer") if self.tools == "autorl-bench" else ("search", "open", "answer")
        if arg is None or tool not in allowed:
            return Observation(text=INVALID_FEEDBACK, moves=self.moves)
        if self.tools == "autorl-bench" and tool == "search":
            return Observation(text=self._snippets(arg), moves=self.moves)
        if self.tools == "autorl-bench" and arg.lower() == PLACEHOLDER:
            return Observation(text=PLACEHOLDER_FEEDBACK, moves=self.moves)
        if tool == "search":
            return Observation(text=self._search(arg), moves=self.moves)
        if tool == "open":
            return Observation(text=self._open(arg), moves=self.moves)
        score = self.grade(arg, self.item)
        self.done = True
        self.last_answer, self.last_score = arg, score
        won = bool(score["correct"])
        reward = float(score.get("f1", won)) if self.reward_kind == "f1" else float(won)
        return Observation(text="Answer recorded.", won=won, moves=self.moves, reward=reward, done=True,
                           answer=arg, answer_score=score)

    def close(self) -> None:
        pass

"""Contamination evidence, in the style of the `decon` method: n-gram overlap between the held-out
split and the text the agent wrote or trained on. Runs on the harness side only (the held-out data
never enters the agent's workspace): it reads the held-out items and the texts handed to it.

For every held-out item, the question (its `prompt`) is cut into word n-grams of `question_n`
words (lower-cased, punctuation dropped). The item is **matched** by a source text when, at one
place of it, at least `question_threshold` of those n-grams occur in the question's order (each
within SLACK words of where the order puts it: a few words inserted, dropped or changed still
match, an unordered bag of template phrases shared by many items does not), every number of the
question occurs in that span, and the answer follows within `answer_window` words: its
`answer_n`-grams at `answer_threshold` for a long answer, the whole answer for a short one (a
number). Lightly reworded items (a phrase changed, a word added) keep most of their n-grams in
order and still match.

Held-out items that the task's own train split matches as well are set aside (listed, not counted):
the agent was given them. The run is flagged when more than TOLERANCE items match; the
tolerance and the n are the protocol of this check (`ContaminationProtocol`), recorded with the
finding."""

from __future__ import annotations

import bisect
import re
from dataclasses import asdict, dataclass
from typing import Iterable

WORD = re.compile(r"[a-z0-9]+")
SLACK = 4                 # words an aligned n-gram may sit off its place (a few words inserted or dropped)
CANDIDATE_GRAMS = 3       # the rarest n-grams of a question propose where it may start in a source
CANDIDATES_PER_GRAM = 200


@dataclass(frozen=True)
class ContaminationProtocol:
    question_n: int = 6
    answer_n: int = 3
    question_threshold: float = 0.5
    answer_threshold: float = 0.5
    answer_window: int = 20      # words after the matched question in which the answer must appear
    tolerance: int = 3           # matched held-out items allowed before the run is flagged (PostTrainBench: 3)

    def to_dict(self) -> dict:
        return asdict(self)


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def ngrams(ws: list[str], n: int) -> list[tuple[str, ...]]:
    if len(ws) < n:
        return [tuple(ws)] if ws else []
    return [tuple(ws[i:i + n]) for i in range(len(ws) - n + 1)]


class SourceIndex:
    """The word n-grams of one source text, each with the (sorted) word positions where it starts."""

    def __init__(self, name: str, text: str, n: int):
        self.name = name
        self.words = words(text)
        self.n = n
        self.pos: dict[tuple[str, ...], list[int]] = {}
        for i, g in enumerate(ngrams(self.words, n)):
            self.pos.setdefault(g, []).append(i)

    def near(self, gram: tuple[str, ...], at: int, slack: int) -> bool:
        """Whether `gram` starts within `slack` words of position `at`."""
        starts = self.pos.get(gram)
        if not starts:
            return False
        k = bisect.bisect_left(starts, at - slack)
        return k < len(starts) and starts[k] <= at + slack


def _answer_text(item: dict) -> str:
    answer = item.get("answer")
    return "" if answer is None else str(answer)


def _contains(seq: list[str], part: list[str]) -> bool:
    k = len(part)
    return any(seq[i:i + k] == part for i in range(max(0, len(seq) - k + 1)))


def align(src: SourceIndex, qwords: list[str], protocol: ContaminationProtocol) -> tuple[float, int | None]:
    """(share of the question's n-grams found in order at one place of the source, where it starts).

    Candidate places come from the question's rarest n-grams; at each, an n-gram counts when it
    starts within SLACK words of where the question's order puts it (room for a few inserted or
    dropped words). An unordered bag of shared n-grams (a template shared by many items) does not
    count: only an aligned run does."""
    grams = ngrams(qwords, protocol.question_n)
    if not grams:
        return 0.0, None
    present = [(len(src.pos[g]), i, g) for i, g in enumerate(grams) if g in src.pos]
    if len(present) < protocol.question_threshold * len(grams):
        return len(present) / len(grams), None
    present.sort()
    candidates = {p - i for _, i, g in present[:CANDIDATE_GRAMS] for p in src.pos[g][:CANDIDATES_PER_GRAM]}
    best, where = 0, None
    for d in sorted(candidates):
        hits = sum(1 for i, g in enumerate(grams) if src.near(g, d + i, SLACK))
        if hits > best:
            best, where = hits, d
    return best / len(grams), where


def match_item(item: dict, sources: Iterable[SourceIndex], protocol: ContaminationProtocol) -> dict | None:
    """The best-matching source of one held-out item, or None. A match needs the question aligned
    (share >= question_threshold), every number of the question inside the aligned span, and the
    answer after it (see the module docstring)."""
    qwords = words(str(item.get("prompt", "")))
    if not qwords:
        return None
    numbers = {w for w in qwords if w.isdigit()}
    answer = words(_answer_text(item))
    best = None
    for src in sources:
        share, d = align(src, qwords, protocol)
        if d is None or share < protocol.question_threshold:
            continue
        span = src.words[max(0, d - SLACK):d + len(qwords) + SLACK]
        if not numbers <= set(span):
            continue
        after = src.words[max(0, d + len(qwords) - SLACK):d + len(qwords) + protocol.answer_window + 2 * len(answer)]
        if answer:
            if len(answer) >= 2 * protocol.answer_n:
                agrams = set(ngrams(answer, protocol.answer_n))
                if len(agrams & set(ngrams(after, protocol.answer_n))) < protocol.answer_threshold * len(agrams):
                    continue
            elif not _contains(after, answer):
                continue
        if best is None or share > best["question_overlap"]:
            best = {"id": item.get("id"), "source": src.name, "question_overlap": round(share, 3),
                    "prompt": str(item.get("prompt", ""))[:300], "answer": _answer_text(item)[:100]}
    return best


def check(held_out: list[dict], sources: dict[str, str], train: list[dict] | None = None,
          protocol: ContaminationProtocol = ContaminationProtocol()) -> dict:
    """The evidence: matched held-out items (with the source each was found in), those set aside
    because the train split holds them too, the verdict against the protocol's tolerance."""
    indexes = [SourceIndex(name, text, protocol.question_n) for name, text in sources.items() if text]
    train_index = ([SourceIndex("train split", "\n".join(f"{x.get('prompt', '')} {_answer_text(x)}" for x in train),
                                protocol.question_n)] if train else [])
    matched, in_train = [], []
    for item in held_out:
        hit = match_item(item, indexes, protocol)
        if hit is None:
            continue
        if train_index and match_item(item, train_index, protocol) is not None:
            in_train.append(hit["id"])
        else:
            matched.append(hit)
    return {"matched": matched, "n_matched": len(matched), "set_aside_in_train": in_train,
            "n_held_out": len(held_out), "n_sources": len(indexes),
            "flagged": len(matched) > protocol.tolerance, "protocol": protocol.to_dict()}

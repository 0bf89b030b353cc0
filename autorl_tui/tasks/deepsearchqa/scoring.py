"""Answer scoring for DeepSearchQA (standard library only; copied into the agent's workspace).

- normalize: lower case, accents and punctuation dropped, articles (a, an, the) dropped, spaces
  collapsed; numbers lose thousands separators and a zero fraction ("1,234.0" -> "1234").
- single answers: exact match after normalization against any gold answer, and token F1 (best
  over the gold answers).
- list answers: the reply is split on ";", "," and " and "; set precision and recall over
  normalized elements (duplicates counted once). Correct = both are 1.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?![\w])")
_SPACED_THOUSANDS = re.compile(r"(?<=\d)\s*,\s*(?=\d{3}(?!\d))")
_LIST_SPLIT = re.compile(r"\s*(?:;|,|\band\b|\n)\s*")


def _number(m: re.Match) -> str:
    whole = m.group(1).replace(",", "")
    frac = (m.group(2) or "").rstrip("0")
    return str(int(whole)) + (f".{frac}" if frac else "")


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKD", str(text))
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    text = _SPACED_THOUSANDS.sub(",", text)        # "1 , 914 , 000" (a word-piece decoder's spacing)
    text = _NUMBER.sub(_number, text)
    text = "".join(" " if ch in string.punctuation and ch != "." else ch for ch in text)
    text = re.sub(r"\.(?!\d)|(?<!\d)\.", " ", text)     # a full stop goes, a decimal point stays
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(pred: str, golds: list[str]) -> bool:
    p = normalize(pred)
    return any(p == normalize(g) for g in golds)


def token_f1(pred: str, golds: list[str]) -> float:
    best = 0.0
    ptoks = normalize(pred).split()
    for g in golds:
        gtoks = normalize(g).split()
        common = sum((Counter(ptoks) & Counter(gtoks)).values())
        if not ptoks or not gtoks or common == 0:
            continue
        prec, rec = common / len(ptoks), common / len(gtoks)
        best = max(best, 2 * prec * rec / (prec + rec))
    return best


def split_list(pred: str) -> list[str]:
    return [x for x in (normalize(part) for part in _LIST_SPLIT.split(pred or "")) if x]


def set_scores(pred: str, golds: list[str]) -> tuple[float, float]:
    """(precision, recall) of the predicted set against the gold set."""
    p = set(split_list(pred))
    g = {normalize(x) for x in golds}
    hit = len(p & g)
    return (hit / len(p) if p else 0.0), (hit / len(g) if g else 0.0)


def score_answer(pred: str | None, golds: list[str], answer_type: str = "single") -> dict:
    """{"correct", "em", "f1", "precision", "recall"} for one answer (None: no answer given)."""
    if pred is None or not str(pred).strip():
        return {"correct": False, "em": 0.0, "f1": 0.0, "precision": 0.0, "recall": 0.0}
    if answer_type == "list":
        prec, rec = set_scores(pred, golds)
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        ok = prec == 1.0 and rec == 1.0
        return {"correct": ok, "em": float(ok), "f1": f1, "precision": prec, "recall": rec}
    em = exact_match(pred, golds)
    return {"correct": em, "em": float(em), "f1": 1.0 if em else token_f1(pred, golds),
            "precision": float(em), "recall": float(em)}


def autorl_string_match(pred: str, gold: str, answer_type: str) -> bool:
    """AutoRL-Bench's fallback verdict when its judge fails: lower-cased containment. A "Single
    Answer" is right when the gold is in the reply or the reply in the gold; otherwise every
    comma-separated gold piece must be in the reply (extra items allowed)."""
    p, g = (pred or "").strip().lower(), (gold or "").strip().lower()
    if answer_type == "Single Answer":
        return g in p or p in g
    return all(piece.strip() in p for piece in g.split(","))


CATEGORIES = ("fully_correct", "correct_with_extraneous", "partially_correct", "fully_incorrect")


def answer_category(score: dict, answer_type: str = "single") -> str:
    """The DeepSearchQA paper's four outcomes of an answer, from its set precision and recall (a
    single answer is fully correct or fully incorrect by its verdict)."""
    if answer_type != "list":
        return "fully_correct" if score.get("correct") else "fully_incorrect"
    prec, rec = score.get("precision", 0.0), score.get("recall", 0.0)
    if rec == 1.0:
        return "fully_correct" if prec == 1.0 else "correct_with_extraneous"
    return "partially_correct" if rec > 0 else "fully_incorrect"

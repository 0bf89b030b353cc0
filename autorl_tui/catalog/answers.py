"""Final-answer extraction and numeric comparison for math tasks (GSM8K convention: `#### N`).

The answer is the first number after the last `####` marker; without a marker, the last number
in the text. Numbers may carry thousands separators (`1,234`), a currency sign (`$5`), a sign
(`-3`), decimals (`5.0` equals `5`), or a trailing period (`42.`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

MARKER = "####"
# A number: a minus sign glued to it (not the operator in "12-7" or "12 - 7"), an optional $,
# digits with optional thousands groups, an optional decimal part.
_NUMBER = r"(?:(?<![\w)])[-−])?\$?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?"
NUMBER_RE = re.compile(_NUMBER)


@dataclass(frozen=True)
class Extraction:
    value: str | None        # canonical number text ("19", "-3", "2.5") or None
    raw: str | None          # the text matched
    has_marker: bool         # the reply used the `####` format


def canonical_number(text: str) -> str | None:
    """'$1,234.50' -> '1234.5'; '5.0' -> '5'; '-0' -> '0'. None when not a number."""
    cleaned = text.strip().replace(",", "").replace("$", "").replace(" ", "").replace("−", "-")
    cleaned = cleaned.rstrip(".")
    if not cleaned:
        return None
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def extract_answer(text: str | None) -> Extraction:
    if not text:
        return Extraction(None, None, False)
    if MARKER in text:
        after = text.rsplit(MARKER, 1)[1]
        m = NUMBER_RE.search(after)
        if m:
            return Extraction(canonical_number(m.group(0)), m.group(0).strip(), True)
        return Extraction(None, None, True)
    matches = NUMBER_RE.findall(text)
    for raw in reversed(matches):
        value = canonical_number(raw)
        if value is not None:
            return Extraction(value, raw.strip(), False)
    return Extraction(None, None, False)


def answers_match(predicted: str | None, expected: str | None) -> bool:
    """Numeric equality of two answers given as text; exact string equality when either is not a number."""
    if predicted is None or expected is None:
        return False
    p, e = canonical_number(predicted), canonical_number(expected)
    if p is not None and e is not None:
        return Decimal(p) == Decimal(e)
    return predicted.strip() == expected.strip()


def gold_answer(item: dict) -> str:
    """The expected answer of a dataset item: `answer`, or the `#### N` tail of a GSM8K solution."""
    answer = item.get("answer")
    if answer is None:
        raise ValueError(f"item {item.get('id', '?')} has no `answer` field")
    answer = str(answer)
    if MARKER in answer:
        found = extract_answer(answer).value
        if found is None:
            raise ValueError(f"item {item.get('id', '?')}: no number after #### in its answer {answer!r}")
        return found
    return canonical_number(answer) or answer.strip()

"""GSM8K in our item shape. Not a generator: the task reads a local copy of the official files
(`provider: local`); this module holds the `normalize` function the card names."""

from __future__ import annotations

from autorl_tui.exitcodes import UsageError
from autorl_tui.catalog.answers import MARKER, extract_answer


def normalize(raw: dict, index: int, split: str) -> dict:
    """{"question", "answer": "...reasoning...\\n#### 72"} -> {id, prompt, answer: "72", solution}."""
    if not isinstance(raw, dict) or "question" not in raw or "answer" not in raw:
        raise UsageError(f"GSM8K {split} line {index + 1}: expected an object with `question` and `answer`, "
                         f"got {str(raw)[:80]!r}")
    solution = str(raw["answer"])
    final = extract_answer(solution)
    if MARKER not in solution or final.value is None:
        raise UsageError(f"GSM8K {split} line {index + 1}: the answer does not end in '#### N' "
                         f"(is this the official format?)")
    return {"id": f"gsm8k-{split}-{index:05d}", "prompt": str(raw["question"]).strip(), "answer": final.value,
            "solution": solution}


def normalize_official(raw: dict, index: int, split: str) -> dict:
    """The `autorl-bench` protocol's shape: training rows stay GSM8K's own {"question", "answer"}
    (AutoRL-Bench's agents read them so); held-out rows add an id and the prompt, and keep the full
    solution as `answer` (OpenCompass reads the gold answer after its "#### ")."""
    normalize(raw, index, split)      # the same checks
    row = {"question": str(raw["question"]), "answer": str(raw["answer"])}
    if split == "train":
        return row
    return {"id": f"gsm8k-{split}-{index:05d}", "prompt": row["question"], **row}

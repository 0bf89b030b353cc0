"""The official DeepSearchQA questions (Google DeepMind's `DSQA-full.csv`: problem, answer,
answer_type "Single Answer" | "Set Answer", problem_category), when `DEEPSEARCHQA_PATH` points at
the file or a folder holding it. Official questions have no corpus: they need a web search
endpoint (scorer_options.search_url or DEEPSEARCHQA_SEARCH_URL)."""

from __future__ import annotations

import csv
import os
import random
import re
from pathlib import Path

ENV = "DEEPSEARCHQA_PATH"
FILE = "DSQA-full.csv"
PARTITION_SEED = 20260101
_SET_SPLIT = re.compile(r"\s*(?:;|\n|,)\s*")


def official_file() -> Path | None:
    raw = os.environ.get(ENV)
    if not raw:
        return None
    path = Path(raw).expanduser()
    path = path / FILE if path.is_dir() else path
    return path if path.is_file() else None


def read_official(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    if not rows or not {"problem", "answer"} <= set(rows[0]):
        raise ValueError(f"{path} is not the DeepSearchQA CSV: expected columns problem, answer, answer_type")
    items = []
    for n, row in enumerate(rows):
        is_set = "set" in (row.get("answer_type") or "").lower()
        answer = (row.get("answer") or "").strip()
        answers = [a for a in _SET_SPLIT.split(answer) if a] if is_set else [answer]
        items.append({"id": f"dsqa-official-{n:04d}", "question": row["problem"].strip(), "answers": answers,
                      "answer_type": "list" if is_set else "single",
                      "question_type": (row.get("problem_category") or "official").strip() or "official",
                      "source": "official"})
    return items


def official_split(path: Path, split: str, sizes: dict) -> list[dict]:
    """A fixed seeded partition: train, dev, test in that order of sizes (defaults 100/100/200)."""
    items = read_official(path)
    random.Random(PARTITION_SEED).shuffle(items)
    start = 0
    for name in ("train", "dev", "test"):
        n = int(sizes.get(name, 0))
        if name == split:
            return items[start:start + n]
        start += n
    raise ValueError(f"unknown split {split!r}")

"""The official DeepSearchQA questions (Google DeepMind's `DSQA-full.csv`: problem, answer,
answer_type "Single Answer" | "Set Answer", problem_category), when `DEEPSEARCHQA_PATH` points at
the file or a folder holding it. Official questions have no corpus: they need a web search
endpoint (scorer_options.search_url or DEEPSEARCHQA_SEARCH_URL).

The splits are AutoRL-Bench's cut (`cut: autorl-bench`, the default): the rows in the order of the
HF dataset's `shuffle(seed=42)` (the `datasets` package computes it), train = its first 100, test =
the next 200 (AutoRL-Bench's held-out set: rows 100-299 of the shuffle), dev = the 100 after those.
`cut: seeded` keeps the older partition (our own seed, train/dev/test in that order).

Gold lists ("Set Answer") are parsed so that an item holding a comma stays one item: `;` or line
breaks separate items where the answer uses them; otherwise commas do, except inside double quotes,
between the digits of a number (`1,234`), and before a suffix that completes the item before it
(`Washington, D.C.`, `Acme, Inc.`, `Austin, TX`). The raw answer is kept as `answer_raw` (and the
CSV's answer type as `answer_type_label`) for AutoRL-Bench's string match.
"""

from __future__ import annotations

import csv
import os
import random
import re
from pathlib import Path

ENV = "DEEPSEARCHQA_PATH"
FILE = "DSQA-full.csv"
PARTITION_SEED = 20260101
AUTORL_SHUFFLE_SEED = 42
AUTORL_TRAIN = 100
AUTORL_TEST = 200
CUTS = ("autorl-bench", "seeded")
_STRONG_SPLIT = re.compile(r"\s*(?:;|\n)\s*")
_SUFFIX = re.compile(r"^(?:D\.?\s?C\.?|Inc\.?|Ltd\.?|LLC|L\.?P\.?|Co\.?|Corp\.?|Jr\.?|Sr\.?|[A-Z]{2}|[IVX]+)$")


def gold_items(answer: str) -> list[str]:
    """A "Set Answer" split into its items (see the module's docstring)."""
    text = (answer or "").strip()
    if _STRONG_SPLIT.search(text):
        return [a for a in _STRONG_SPLIT.split(text) if a]
    parts = next(csv.reader([text], skipinitialspace=True), [])
    items: list[str] = []
    for part in (p.strip() for p in parts):
        if items and (_SUFFIX.match(part) or (re.fullmatch(r"\d{3}\b.*", part) and re.search(r"\d$", items[-1]))):
            joiner = "," if part[:1].isdigit() else ", "
            items[-1] = f"{items[-1]}{joiner}{part}"
        elif part:
            items.append(part)
    return items


def autorl_bench_order(n: int) -> list[int]:
    """Row indices in the order of HF datasets' `Dataset.shuffle(seed=42)` over n rows."""
    from datasets import Dataset
    return list(Dataset.from_dict({"row": list(range(n))}).shuffle(seed=AUTORL_SHUFFLE_SEED)["row"])


def official_file(home_copy: Path | None = None) -> Path | None:
    """$DEEPSEARCHQA_PATH (the CSV or its folder) when set, else DSQA-full.csv in `home_copy` (the
    home's `data/deepsearchqa/`, where `autorl-tui data get deepsearchqa` places it); else None."""
    raw = os.environ.get(ENV)
    candidates = [Path(raw).expanduser()] if raw else []
    candidates += [Path(home_copy)] if home_copy is not None else []
    for path in candidates:
        path = path / FILE if path.is_dir() else path
        if path.is_file():
            return path
    return None


def read_official(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    if not rows or not {"problem", "answer"} <= set(rows[0]):
        raise ValueError(f"{path} is not the DeepSearchQA CSV: expected columns problem, answer, answer_type")
    items = []
    for n, row in enumerate(rows):
        is_set = "set" in (row.get("answer_type") or "").lower()
        answer = (row.get("answer") or "").strip()
        answers = gold_items(answer) if is_set else [answer]
        items.append({"id": f"dsqa-official-{n:04d}", "question": row["problem"].strip(), "answers": answers,
                      "answer_type": "list" if is_set else "single", "answer_raw": row.get("answer") or "",
                      "answer_type_label": (row.get("answer_type") or "Single Answer").strip(),
                      "question_type": (row.get("problem_category") or "official").strip() or "official",
                      "source": "official"})
    return items


def official_split(path: Path, split: str, sizes: dict, cut: str = "autorl-bench") -> list[dict]:
    """The split's questions: AutoRL-Bench's cut (train 100, test 200, dev 100 of the seed-42
    shuffle), or with `cut: seeded` our own partition in the order train, dev, test of `sizes`."""
    items = read_official(path)
    if cut == "autorl-bench":
        order = [items[i] for i in autorl_bench_order(len(items))]
        bounds = {"train": (0, AUTORL_TRAIN), "test": (AUTORL_TRAIN, AUTORL_TRAIN + AUTORL_TEST),
                  "dev": (AUTORL_TRAIN + AUTORL_TEST, AUTORL_TRAIN + AUTORL_TEST + int(sizes.get("dev", 100)))}
        if split not in bounds:
            raise ValueError(f"unknown split {split!r}: AutoRL-Bench's cut has train, dev and test")
        lo, hi = bounds[split]
        return order[lo:hi]
    if cut != "seeded":
        raise ValueError(f"unknown cut {cut!r}: use one of {', '.join(CUTS)}")
    random.Random(PARTITION_SEED).shuffle(items)
    start = 0
    for name in ("train", "dev", "test"):
        n = int(sizes.get(name, 0))
        if name == split:
            return items[start:start + n]
        start += n
    raise ValueError(f"unknown split {split!r}")

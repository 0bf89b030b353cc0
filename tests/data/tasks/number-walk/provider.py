"""The card's data provider (`function: provider:materialize`): a folder per split with items.jsonl."""

import json
import random
from pathlib import Path


def materialize(card, split, out_dir):
    spec = card.data["splits"][split]
    rng = random.Random(f"number-walk/{spec['seed']}")
    folder = Path(out_dir) / split
    folder.mkdir(parents=True, exist_ok=True)
    items = []
    for i in range(int(spec["n"])):
        start = rng.randint(0, 99) + 100 * ("train", "dev", "test").index(split)   # splits never share an episode
        items.append({"id": f"{split}-{i}", "start": start, "target": start + rng.choice([-3, -2, -1, 1, 2, 3]),
                      "task_type": "walk"})
    (folder / "items.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items))
    return folder


def check_split(card, split, path):
    """`tasks validate` calls this on every materialized split: what only this task knows."""
    items = [json.loads(line) for line in (Path(path) / "items.jsonl").read_text().splitlines()]
    far = [it["id"] for it in items if abs(it["target"] - it["start"]) >= card.protocol.max_steps]
    return [(f"{len(far)} episode(s) cannot be won within max_steps (e.g. {far[:3]})",
             "raise protocol.max_steps or move the targets closer")] if far else []

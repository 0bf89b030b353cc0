"""The interactive benchmarks' official data in the official files' shapes, small, and the shipped
benchmark cards declaring it as a local hub server (tests/support/hub_server.py) publishes it.

The real files' checksums cannot match these bytes, so a card copied here keeps the shipped card's
hub, repository, revision and file names and takes the checksum of what the server serves."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import yaml

from tests.support.harness import REPO, card_without_code

DSQA_COLUMNS = ["problem", "problem_category", "answer", "answer_type"]


def webshop_official_bytes(products: list[dict]) -> dict[str, bytes]:
    """Generated products (autorl_tui.tasks.webshop.catalog) written as WebShop's small data set:
    items_shuffle_1000.json, items_ins_v2_1000.json (attributes, and the instruction WebShop's synthetic
    goals start from) and items_human_ins.json (one human goal each, naming an attribute and, as real
    instructions do, the option values it asks for)."""
    raw = [{"asin": p["asin"], "name": p["title"], "category": p["category"], "query": p["query"],
            "product_category": p["product_category"], "pricing": f"${p['price']:.2f}",
            "small_description": p["features"], "full_description": p["description"],
            "customization_options": {g: [{"value": v, "image": None} for v in vals] for g, vals in p["options"].items()}}
           for p in products]
    human = {p["asin"]: [{"instruction": " ".join([f"i want {p['attributes'][0]} {p['name']}"]
                                                  + [f"{g} {vals[0]}" for g, vals in p["options"].items()]) + ".",
                          "instruction_attributes": p["attributes"][:1],
                          "instruction_options": [vals[0] for vals in p["options"].values()]}] for p in products}
    return {"items_shuffle_1000.json": json.dumps(raw).encode(),
            "items_ins_v2_1000.json": json.dumps({p["asin"]: {"attributes": p["attributes"],
                                                              "instruction": f"i want {p['attributes'][0]} {p['name']}",
                                                              "instruction_attributes": p["attributes"][:1]}
                                                  for p in products}).encode(),
            "items_human_ins.json": json.dumps(human).encode()}


def dsqa_csv_bytes(n: int) -> bytes:
    """A CSV in DSQA-full.csv's columns: every third row a set answer whose items hold commas."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(DSQA_COLUMNS)
    for i in range(n):
        kind = "Set Answer" if i % 3 == 0 else "Single Answer"
        answer = f"Town {i}, Washington, D.C., Austin, TX" if kind == "Set Answer" else f"answer {i}"
        w.writerow([f"Question number {i}: which places?", "Geography", answer, kind])
    return out.getvalue().encode()


def benchmark_card_on_hub(hub, task: str, files: dict[str, bytes], tasks_dir: Path) -> Path:
    """The shipped `task` card (and its description) in tasks_dir/<task>/, each of its
    `data.official` files published on `hub` where the card says it lives; returns tasks_dir."""
    src = REPO / "autorl_tui" / "tasks" / task
    card = yaml.safe_load((src / "task.yaml").read_text())
    entries = []
    for entry in card["data"]["official"]:
        published = hub.publish(entry["hub"], entry["repo"], entry["revision"], entry["file"], files[entry["path"]],
                                entry["path"])
        entries.append({**entry, "sha256": published["sha256"]})
    card["data"]["official"] = entries
    card = card_without_code(card)          # only the card is copied, not its folder's code
    folder = Path(tasks_dir) / task
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.yaml").write_text(yaml.safe_dump(card, sort_keys=False))
    shutil.copy(src / "description.md", folder / "description.md")
    return Path(tasks_dir)

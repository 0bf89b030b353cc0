"""Fill in WebShop's own rewards for the cases of tests/data/webshop/goal_reference.json.

Run it OUTSIDE the project, in a scratch environment holding WebShop's reward dependencies
(thefuzz==0.19.0 without python-Levenshtein, as WebShop pins it; rich; spaCy), against a checkout
of princeton-nlp/WebShop:

    python -m venv /tmp/wsref/venv && /tmp/wsref/venv/bin/pip install thefuzz==0.19.0 rich spacy
    /tmp/wsref/venv/bin/python scripts/webshop_goal_reference.py /path/to/WebShop tests/data/webshop/goal_reference.json

It imports web_agent_site/engine/goal.py from the checkout and calls its get_reward on each case,
converting our product shape to WebShop's (Title, Attributes, BulletPoints, Description). goal.py
loads spaCy's `en_core_web_sm` at import; where that model is not installed, a blank English
pipeline stands in (the script says so and records it in the file): every case buys a product
with the goal's own name and query, so goal.py's type reward is 1.0 whatever the tagger.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def load_goal_module(webshop: Path):
    import spacy
    parser = "en_core_web_sm"
    try:
        spacy.load(parser)
    except OSError:
        blank = spacy.blank("en")
        spacy.load = lambda name, *a, **k: blank
        parser = "blank English pipeline (en_core_web_sm not installed)"
        print(f"note: {parser}", file=sys.stderr)
    sys.path.insert(0, str(webshop))
    from web_agent_site.engine import goal
    return goal, parser


def webshop_product(p: dict) -> dict:
    return {"name": p["name"], "query": p["query"], "product_category": p["product_category"], "Title": p["title"],
            "Attributes": p["attributes"], "BulletPoints": p["features"], "Description": p["description"]}


def main(webshop: str, table: str) -> None:
    goal_module, parser = load_goal_module(Path(webshop))
    path = Path(table)
    doc = json.loads(path.read_text())
    for case in doc["cases"]:
        case["webshop_reward"] = goal_module.get_reward(webshop_product(case["product"]), case["goal"],
                                                         case["price"], case["chosen"])
    doc["produced_with"] = {"goal.py": str(Path(webshop) / "web_agent_site/engine/goal.py"), "spacy": parser}
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(doc['cases'])} cases written to {path}")


if __name__ == "__main__":
    main(*sys.argv[1:3])

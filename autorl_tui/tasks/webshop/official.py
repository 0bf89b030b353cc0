"""The official WebShop data, when $WEBSHOP_DATA holds it, in our product and goal shapes.

Files looked for in $WEBSHOP_DATA, else in the home's `data/webshop/` (`autorl-tui data get webshop`),
as `setup.sh` of princeton-nlp/WebShop downloads them:
`items_shuffle*.json` (products), `items_ins_v2*.json` (attributes per asin) and
`items_human_ins.json` (human instructions per asin). Goals get WebShop's price bound rule.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

from .catalog import price_bound


def official_root(home_copy: Path | None = None) -> Path | None:
    """$WEBSHOP_DATA when set, else `home_copy` (the home's `data/webshop/`, where `autorl-tui data get
    webshop` places the files), when it holds the files; else None."""
    root = os.environ.get("WEBSHOP_DATA")
    candidates = [Path(root).expanduser()] if root else []
    candidates += [Path(home_copy)] if home_copy is not None else []
    for path in candidates:
        if _find(path, "items_shuffle") and _find(path, "items_human_ins"):
            return path
    return None


def _find(root: Path, stem: str) -> Path | None:
    hits = sorted(root.glob(f"{stem}*.json"))
    return hits[0] if hits else None


def _price(pricing) -> float | None:
    nums = [float(x.replace(",", "")) for x in re.findall(r"\$?([0-9][0-9,]*\.?[0-9]*)", str(pricing or ""))]
    return nums[0] if nums else None


def load_official(root: Path) -> tuple[list[dict], list[dict]]:
    """(products, goals) from the official files; a product without a price costs $100.00, as in WebShop."""
    raw = json.loads(_find(root, "items_shuffle").read_text())
    attrs_file = _find(root, "items_ins_v2")
    attrs = json.loads(attrs_file.read_text()) if attrs_file else {}
    human = json.loads(_find(root, "items_human_ins").read_text())
    products = []
    for p in raw:
        price = _price(p.get("pricing"))
        price = 100.0 if price is None else price
        if not p.get("asin"):
            continue
        options = {}
        for group, values in (p.get("customization_options") or {}).items():
            vals = [(v.get("value") if isinstance(v, dict) else str(v)).strip().lower() for v in values or []]
            if vals:
                options[group.strip().lower()] = vals
        products.append({
            "asin": p["asin"], "name": p.get("name", ""), "category": p.get("category", ""),
            "product_category": p.get("product_category", ""), "query": (p.get("query") or "").lower().strip(),
            "title": p.get("name", ""), "price": price,
            "attributes": list((attrs.get(p["asin"]) or {}).get("attributes") or []),
            "options": options, "features": list(p.get("small_description") or []),
            "description": p.get("full_description") or "", "rating": p.get("average_rating", "N.A."),
        })
    by_asin = {p["asin"]: p for p in products}
    rng = random.Random(233)
    goals = []
    for asin in sorted(human):
        if asin not in by_asin:
            continue
        for k, ins in enumerate(human[asin]):
            if not ins.get("instruction_attributes"):
                continue
            product = by_asin[asin]
            upper = price_bound(product["price"], rng)
            suffix = f", and price lower than {upper:.2f} dollars" if upper < 1_000_000 else ""
            opts = ins.get("instruction_options") or []
            goal_options = dict(opts) if isinstance(opts, dict) else list(opts)   # a list, matched as goal.py does
            goals.append({"id": f"{asin}-{k}", "asin": asin, "category": product["category"],
                          "query": product["query"], "name": product["name"],
                          "product_category": product["product_category"],
                          "instruction": ins["instruction"].strip().rstrip(".") + suffix,
                          "attributes": list(ins["instruction_attributes"]), "goal_options": goal_options,
                          "price_upper": upper})
    return products, goals

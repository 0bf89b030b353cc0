"""Write the small WebShop catalog in the official files' format that the text-environment and Lucene
agreement tests use (tests/data/webshop/official_small/).

    python scripts/webshop_official_fixture.py tests/data/webshop/official_small

The products come from the generated catalog (autorl_tui/tasks/webshop/catalog.py, seed 11, 12 per
type), written as WebShop's `items_shuffle_1000.json`, `items_ins_v2_1000.json` and
`items_human_ins.json`, with what real scraped records carry and the generated ones lack, so that
the text environment and the search see it: price ranges (`$12.99 - $15.99`), products without a
price, option values with `/` and capitals, a bullet list given as one string, a duplicate asin,
descriptions in other words and lengths (for BM25's length norms), possessives, hyphens, decimals,
thousands separators, `U.S.A.`, listings repeated under other ids (equal scores), accented letters and the symbols
listings hold (™ ® – ’ ” ✔ ★ ½).
Deterministic: the same bytes every run.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autorl_tui.tasks.webshop import catalog as C  # noqa: E402

EXTRA = [
    "Made in the U.S.A. with 100% recyclable packaging.",
    "Our founder's recipe since 1,998 – trusted by 10,000+ families.",
    "Award-winning formula™, now with 2.5x more value ✔",
    "Customers' favorite ★★★★★ – rated 4.8/5 by 1,250 reviewers.",
    "Café-style quality, crème de la crème of the range.",
    "Dimensions: 12.5\" x 8.25\" x 3\"; weight: ½ lb.",
    "It’s the one you’ll reach for every day — “simply the best”.",
    "Easy-to-use, e-mail support 24/7, no questions asked.",
    "Registered® trademark of its owner; not a medical device.",
    "Perfect gift for men, women, kids and teens: birthdays, holidays & more!",
]


def official_records(products: list[dict], rng: random.Random) -> tuple[list[dict], dict, dict]:
    raw, ins, human = [], {}, {}
    for i, p in enumerate(products):
        options = {g: [{"value": v, "image": None} for v in vals] for g, vals in p["options"].items()}
        if i % 7 == 3 and "size" in options:          # values with '/' and capitals, as scraped
            options["size"] = [{"value": v["value"].title() + " / Pack", "image": None} for v in options["size"]]
        if i % 11 == 5:
            options = {}                                # a product without options
        pricing = f"${p['price']:.2f}"
        if i % 9 == 2:
            pricing = f"${p['price']:.2f} - ${p['price'] * 1.4:.2f}"
        elif i % 23 == 7:
            pricing = ""                               # no price: WebShop charges $100.00
        extra = rng.sample(EXTRA, rng.randint(0, 3))
        description = " ".join([p["description"]] + extra + [p["description"]] * rng.randint(0, 2))
        features = p["features"] if i % 13 != 4 else " ".join(p["features"])     # one string
        raw.append({"asin": p["asin"], "name": p["title"], "category": p["category"], "query": p["query"],
                    "product_category": p["product_category"], "pricing": pricing, "small_description": features,
                    "full_description": description, "images": [f"https://example.invalid/{p['asin']}.jpg"],
                    "customization_options": options, "average_rating": p["rating"]})
        instruction = f"i want {' and '.join(p['attributes'][:2])} {p['name']}" if i % 6 != 1 else None
        ins[p["asin"]] = {"attributes": p["attributes"], "instruction": instruction,
                          "instruction_attributes": p["attributes"][:2] if instruction else None}
        human[p["asin"]] = [{"instruction": f"i need {p['attributes'][0]} {p['name']}.",
                             "instruction_attributes": p["attributes"][:1],
                             "instruction_options": [vals[0]["value"] for vals in options.values()]}]
    dup = dict(raw[10], name=raw[10]["name"] + " (duplicate listing)")
    raw.insert(40, dup)                                 # WebShop keeps the first record of an asin
    for k, (source, asin) in enumerate(((20, "B0ZZTWIN01"), (20, "B00TWIN002"), (33, "B0MTWIN003"))):
        raw.insert(60 + 30 * k, dict(raw[source], asin=asin))   # same text, other ids: equal scores
        ins[asin] = dict(ins[raw[source]["asin"]], instruction=None)
    return raw, ins, human


def main(out: str) -> None:
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    products = C.generate_products(seed=11, per_type=12)
    raw, ins, human = official_records(products, random.Random(11))
    for name, content in (("items_shuffle_1000.json", raw), ("items_ins_v2_1000.json", ins),
                          ("items_human_ins.json", human)):
        (folder / name).write_text(json.dumps(content, ensure_ascii=False, indent=0) + "\n")
    print(f"{len(raw)} records written to {folder}")


if __name__ == "__main__":
    main(sys.argv[1])

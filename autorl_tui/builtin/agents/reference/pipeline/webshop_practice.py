"""Practice instructions for WebShop: the agent writes its own shopping instructions for the shop's
products (the catalog is the environment, open to the agent as WebShop's is; the held-out
instructions stay hidden), lets the expert play them through the workspace's `webshop_api` exactly
as the grader would, and keeps the steps of the episodes it won as more SFT data.

Why: the train split's instructions target a few products per type, so a small model learns to open
those products (46 of 47 held-out product clicks went to train targets, measured) instead of the
one the instruction describes. Practice instructions make every product of the shop a target,
each asked for with its own attributes, option values and price bound. Measured on the engine
test's card with tiny-webshop (docs/webshop.md): no gain (8 and 12 of 144 held-out won against
10 without); the tiny model then learned one product per type. The reference agent leaves it off
(`ws_practice` 0); a base model that can read titles may use it better.

Prints one JSON line {"stage": "practice", ...}; writes prompt/completion jsonl to --out."""
import argparse
import json
import os
import random
import sys
import time

from common import setup_threads

OPENINGS = ["i need", "i am looking for", "find me", "i want to buy", "i'm searching for", "looking for"]


def price_bound(price: float, rng: random.Random) -> float:
    step = 5.0 if price < 50 else 10.0 if price < 200 else 50.0
    return (int(price * rng.uniform(1.02, 1.5) / step) + 1) * step


def practice_goal(product: dict, rng: random.Random, goal_id: str, catalog: str) -> dict:
    attrs = product.get("attributes") or []
    attrs = rng.sample(attrs, rng.randint(1, min(3, len(attrs)))) if attrs else []
    options = {g: rng.choice(vals) for g, vals in (product.get("options") or {}).items() if vals}
    style = rng.randrange(3)
    if not options:
        opts = ""
    elif style == 0:
        opts = " with " + ", and ".join(f"{g}: {v}" for g, v in options.items())
    elif style == 1:
        opts = " in " + " and ".join(f"{v} {g}" for g, v in options.items())
    else:
        opts = ", " + ", ".join(f"{g} {v}" for g, v in options.items())
    name = product["name"]
    article = "" if name.endswith("s") and not name.endswith("ss") else "a "
    upper = price_bound(float(product["price"]), rng)
    text = f"{rng.choice(OPENINGS)} {article}{' '.join(attrs)} {name}{opts}, and price lower than {upper:.2f} dollars"
    return {"id": goal_id, "asin": product["asin"], "category": product.get("category", ""),
            "query": product.get("query", name), "name": name,
            "product_category": product.get("product_category", ""), "instruction": " ".join(text.split()),
            "attributes": attrs, "goal_options": options, "price_upper": upper, "catalog": catalog}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.environ.get("DATA_PATH", "data"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--per_product", type=int, default=2, help="practice instructions per product")
    ap.add_argument("--max_products", type=int, default=2000, help="at most this many products (a random sample)")
    ap.add_argument("--max_steps", type=int, default=15, help="the grader's step limit")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    setup_threads()
    data = os.path.abspath(a.data)
    sys.path.insert(0, data)
    from webshop_api import run_episodes, summarize_rewards
    from webshop_api.api import with_paths
    from webshop_api.experts import expert_generate

    t0 = time.time()
    rng = random.Random(f"practice/{a.seed}")
    catalog = os.path.join(data, "catalog.jsonl")
    with open(catalog) as fh:
        products = [json.loads(line) for line in fh if line.strip()]
    rng.shuffle(products)
    goals = [with_paths(practice_goal(p, rng, f"practice-{i:05d}-{k}", catalog), data)
             for i, p in enumerate(products[:a.max_products]) for k in range(a.per_product)]
    rows, kept, results = [], 0, []
    for goal in goals:
        steps = []

        def generate(prompts):
            replies = expert_generate(prompts)
            steps.extend(zip(prompts, replies))  # noqa: B023 (run_episodes calls it before the loop goes on)
            return replies

        result = run_episodes(generate, [goal], max_steps=a.max_steps, batch_size=1)[0]
        results.append(result)
        if result.won:
            kept += 1
            rows += [{"source": "practice", "prompt": p, "completion": [{"role": "assistant", "content": r}]}
                     for p, r in steps]
    tmp = a.out + ".partial"
    with open(tmp, "w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    os.replace(tmp, a.out)
    print(json.dumps({"stage": "practice", "products": min(len(products), a.max_products), "played": len(results),
                      "won": kept, **summarize_rewards(results), "examples": len(rows),
                      "total_s": round(time.time() - t0, 1), "out": a.out}), flush=True)


if __name__ == "__main__":
    main()

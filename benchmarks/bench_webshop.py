"""WebShop environment throughput on this machine (no model: the expert plays).

Prints: catalog + index build time, search latency p50/p95 over the dev instructions' expert
queries, and the expert's env steps/s and episodes/s through the batched episode runner on the
card's dev and train instructions. Model inference comes on top."""

import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main():
    from autorl_tui.catalog.tasks import load_task_card
    from autorl_tui.tasks.webshop.api import run_episodes, summarize_rewards
    from autorl_tui.tasks.webshop.experts import expert_generate, search_query
    from autorl_tui.tasks.webshop.provider import build_split
    from autorl_tui.tasks.webshop.shop import Shop

    card = load_task_card(REPO / "autorl_tui" / "tasks" / "webshop-mini")
    card.data["params"]["source"] = "generated"
    products, train = build_split(card, "train", secret=bytes(32))   # a fixed partition secret: any home's would do
    t0 = time.perf_counter()
    shop = Shop(products)
    print(f"webshop_index: {len(products)} products indexed in {1000 * (time.perf_counter() - t0):.0f} ms")

    lat = []
    for goal in train:
        q = search_query(goal["instruction"])
        t = time.perf_counter()
        shop.engine.search(q)
        lat.append(1000 * (time.perf_counter() - t))
    lat.sort()
    print(f"webshop_search_p50: {statistics.median(lat):.2f} ms")
    print(f"webshop_search_p95: {lat[int(0.95 * (len(lat) - 1))]:.2f} ms")

    with tempfile.TemporaryDirectory() as tmp:
        catalog = Path(tmp) / "catalog.jsonl"
        import json
        catalog.write_text("".join(json.dumps(p) + "\n" for p in products))
        episodes = [dict(g, catalog=str(catalog)) for g in train]
        t0 = time.perf_counter()
        results = run_episodes(expert_generate, episodes, max_steps=int(card.protocol.max_steps or 15), batch_size=16)
        el = time.perf_counter() - t0
    steps = sum(r.steps for r in results)
    figures = summarize_rewards(results)
    print(f"webshop_expert: {sum(r.won for r in results)}/{len(results)} won, mean reward "
          f"{figures['mean_reward']:.1f}, {steps} steps")
    print(f"webshop_episodes_per_s: {len(results) / el:.1f} episodes/s (expert, batch 16, prompts built and parsed)")
    print(f"webshop_steps_per_s: {steps / el:.1f} steps/s")


if __name__ == "__main__":
    main()

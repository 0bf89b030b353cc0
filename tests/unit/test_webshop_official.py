"""The official WebShop files, when WEBSHOP_DATA points at them, feed the same environment."""

import json

from autorl_tui.catalog.tasks import data_source_fingerprint, load_task_card, materialize
from autorl_tui.tasks.webshop import catalog as C
from autorl_tui.tasks.webshop.api import list_episodes, open_episode

from tests.support.harness import REPO
from tests.support.official_interactive import webshop_official_bytes

CARD = REPO / "autorl_tui" / "tasks" / "webshop" / "task.yaml"      # the benchmark card: official data only


def write_official(root, products):
    """Our generated products written in the official files' shapes (items_shuffle, items_ins_v2,
    items_human_ins)."""
    for name, content in webshop_official_bytes(products).items():
        (root / name).write_bytes(content)


def test_official_data_is_used_and_keys_the_cache(tmp_path, monkeypatch):
    products = C.generate_products(seed=7, per_type=1)
    official = tmp_path / "webshop_data"
    official.mkdir()
    write_official(official, products)
    monkeypatch.delenv("WEBSHOP_DATA", raising=False)
    card = load_task_card(CARD)
    missing_key = data_source_fingerprint(card)
    monkeypatch.setenv("WEBSHOP_DATA", str(official))
    assert data_source_fingerprint(card) != missing_key
    paths = {s: materialize(card, s, tmp_path / "cache") for s in ("train", "dev", "test")}
    catalog = [json.loads(x) for x in (paths["test"] / "catalog.jsonl").read_text().splitlines()]
    assert sorted(p["asin"] for p in catalog) == sorted(p["asin"] for p in products)
    goals = {s: list_episodes(p) for s, p in paths.items()}
    assert sum(len(g) for g in goals.values()) == len(products)
    assert not {g["asin"] for g in goals["train"]} & {g["asin"] for g in goals["test"]}
    goal = goals["test"][0]
    assert goal["instruction"].startswith("i want ") and "price lower than" in goal["instruction"]
    ep = open_episode(goal)
    ep.reset()
    target = ep.shop.by_asin[goal["asin"]]
    ep.step(f"search[{target['title']}]")
    ep.step(f"click[{goal['asin'].lower()}]")
    assert isinstance(goal["goal_options"], list)      # the human goals' options, a list as in WebShop
    for value in goal["goal_options"]:
        ep.step(f"click[{value}]")
    obs = ep.step("click[buy now]")
    assert obs.done and obs.reward == 1.0


def test_a_product_without_a_price_costs_100_dollars_as_in_webshop(tmp_path):
    from autorl_tui.tasks.webshop.official import load_official
    products = C.generate_products(seed=7, per_type=1)[:3]
    write_official(tmp_path, products)
    raw = json.loads((tmp_path / "items_shuffle_1000.json").read_text())
    raw[0]["pricing"] = ""
    (tmp_path / "items_shuffle_1000.json").write_text(json.dumps(raw))
    loaded, goals = load_official(tmp_path)
    assert [p["asin"] for p in loaded] == [p["asin"] for p in products]
    assert loaded[0]["price"] == 100.0 and loaded[1]["price"] == products[1]["price"]
    assert all(isinstance(g["goal_options"], list) for g in goals)

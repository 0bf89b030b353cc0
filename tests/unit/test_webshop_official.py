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
    card.data["params"]["episodes"] = "human"        # the human goals over our own partition (not the protocol's)
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


def test_the_benchmark_card_plays_autorl_bench_s_sessions_0_to_99(tmp_path, monkeypatch):
    """The shipped card's episodes: WebAgentTextEnv's sessions 0-99 for test, train and dev drawn from
    other sessions over products no test session buys; every split carries the official files its
    shop is built from, and the train split the expert's steps in the grader's prompt format."""
    from autorl_tui.tasks.webshop.webagent import WebShopText
    official = REPO / "tests" / "data" / "webshop" / "official_small"
    monkeypatch.setenv("WEBSHOP_DATA", str(official))
    card = load_task_card(CARD)
    paths = {s: materialize(card, s, tmp_path / "cache") for s in ("train", "dev", "test")}
    items = {s: list_episodes(p) for s, p in paths.items()}
    reference = json.loads((REPO / "tests" / "data" / "webshop" / "text_env_reference.json").read_text())
    assert [it["session"] for it in items["test"]] == list(range(100))
    assert [it["instruction"] for it in items["test"]] == [g["instruction_text"] for g in reference["goals"]]
    test_products = {it["asin"] for it in items["test"]}
    assert items["train"] and items["dev"]
    assert not test_products & {it["asin"] for s in ("train", "dev") for it in items[s]}
    assert not {it["asin"] for it in items["train"]} & {it["asin"] for it in items["dev"]}
    assert min(it["session"] for s in ("train", "dev") for it in items[s]) >= 100
    shop = WebShopText.from_folder(official)
    ep = open_episode(items["test"][0])
    assert ep.reset().text == reference["episodes"][0]["steps"][0]["observation"]
    assert ep.task == shop.goals[0]["instruction_text"]
    assert (paths["train"] / "webshop_data" / "items_shuffle_1000.json").exists()
    assert {"webagent.py", "lucene.py", "porter.py"} <= {f.name for f in (paths["train"] / "webshop_api").iterdir()}
    trajectories = [json.loads(x) for x in (paths["train"] / "expert_trajectories.jsonl").read_text().splitlines()]
    assert len(trajectories) == len(items["train"]) and sum(t["reward"] >= 0.5 for t in trajectories) > 0
    first = json.loads((paths["train"] / "sft_chat.jsonl").read_text().splitlines()[0])
    assert "WebShop [SEP] Instruction: [SEP] " in first["messages"][1]["content"]


def test_a_card_naming_unknown_episodes_is_refused_in_one_line(monkeypatch):
    from autorl_tui.catalog.tasks import provider_data_missing
    monkeypatch.setenv("WEBSHOP_DATA", str(REPO / "tests" / "data" / "webshop" / "official_small"))
    card = load_task_card(CARD)
    assert provider_data_missing(card) is None
    card.data["params"]["episodes"] = "synthetic"
    why = provider_data_missing(card)
    assert "data.params.episodes must be human" in why and "sessions" in why and "\n" not in why

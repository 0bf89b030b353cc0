"""The WebShop store: pages, action validity, pagination, search, the expert, the card's splits."""

import json
import zlib
from pathlib import Path

import pytest

from autorl_tui.catalog.tasks import load_task_card, materialize
from autorl_tui.cli import main
from autorl_tui.tasks.webshop import catalog as C
from autorl_tui.tasks.webshop.api import list_episodes, run_episodes, summarize_rewards
from autorl_tui.tasks.webshop.grader_env import WebshopEnvironment
from autorl_tui.tasks.webshop.experts import expert_generate
from autorl_tui.tasks.webshop.shop import Shop, ShopEpisode

CARD = Path(__file__).resolve().parents[2] / "autorl_tui" / "tasks" / "webshop-mini" / "task.yaml"


@pytest.fixture(scope="module")
def shop():
    return Shop(C.generate_products(seed=0, per_type=20))


def target_goal(shop, rng_seed=5):
    return C.make_goals(shop.products[:50], 1, rng_seed, "t")[0]


def test_catalog_and_goals_are_deterministic_per_seed():
    assert C.generate_products(3, 5) == C.generate_products(3, 5)
    assert C.generate_products(3, 5) != C.generate_products(4, 5)
    prods = C.generate_products(3, 5)
    assert C.make_goals(prods, 10, 1, "x") == C.make_goals(prods, 10, 1, "x")
    assert len({p["asin"] for p in prods}) == len(prods) == 5 * len(C.TYPES)


def test_goals_are_reachable_and_read_like_instructions():
    prods = C.generate_products(0, 5)
    by = {p["asin"]: p for p in prods}
    for g in C.make_goals(prods, 40, 2, "g"):
        p = by[g["asin"]]
        assert set(g["attributes"]) <= set(p["attributes"])
        assert all(v in p["options"][k] for k, v in g["goal_options"].items())
        assert p["price"] < g["price_upper"] and g["instruction"].endswith(f"lower than {g['price_upper']:.2f} dollars")
        assert p["name"] in g["instruction"]


def test_search_is_only_allowed_on_the_search_page_and_clicks_only_on_shown_elements(shop):
    ep = ShopEpisode(shop, target_goal(shop))
    obs = ep.reset()
    assert obs.admissible == ["search[...]"] and "[Search]" in obs.text
    assert not ep.step("click[buy now]").valid            # nothing to click on the search page
    assert not ep.step("buy it please").valid             # not an action at all
    obs = ep.step("search[chocolate bar]")
    assert obs.valid and "Page 1 (Total results: " in obs.text
    assert not ep.step("search[coffee]").valid            # no search box on the results page
    assert not ep.step("click[b0nonexistent]").valid
    assert ep.step("click[back to search]").valid and ep.page == "search"
    assert ep.moves == 6                               # invalid actions cost a step too


def test_results_come_ten_per_page_out_of_at_most_fifty(shop):
    ep = ShopEpisode(shop, target_goal(shop))
    ep.reset()
    obs = ep.step("search[organic gluten free cotton]")
    assert len(ep.results) == 50
    items = [a for a in obs.admissible if a.startswith("click[b0")]
    assert len(items) == 10 and "click[< prev]" not in obs.admissible and "click[next >]" in obs.admissible
    for _ in range(4):
        obs = ep.step("click[next >]")
    assert ep.page_no == 5 and "click[next >]" not in obs.admissible and "click[< prev]" in obs.admissible
    assert not ep.step("click[next >]").valid
    ep.step("click[< prev]")
    assert ep.page_no == 4


def test_item_page_options_sub_pages_and_buying(shop):
    goal = target_goal(shop)
    p = shop.by_asin[goal["asin"]]
    ep = ShopEpisode(shop, goal)
    ep.reset()
    ep.step(f"search[{p['title']}]")
    assert ep.results[0] == p["asin"]                     # a product's own title finds it first
    obs = ep.step(f"click[{p['asin'].lower()}]")
    assert p["title"] in obs.text and f"Price: ${p['price']:.2f}" in obs.text
    assert ep.step("click[features]").text.count(p["features"][0]) == 1
    ep.step("click[< prev]")
    for group, value in goal["goal_options"].items():
        obs = ep.step(f"click[{value}]")
        assert f"(selected: {value})" in obs.text
    obs = ep.step("click[buy now]")
    assert obs.done and obs.reward == 1.0 and obs.won and obs.info["asin"] == p["asin"]
    with pytest.raises(RuntimeError):
        ep.step("click[buy now]")


def test_buying_without_the_options_is_not_a_win(shop):
    goal = target_goal(shop)
    ep = ShopEpisode(shop, goal)
    ep.reset()
    ep.step(f"search[{shop.by_asin[goal['asin']]['title']}]")
    ep.step(f"click[{goal['asin'].lower()}]")
    obs = ep.step("click[buy now]")
    n = len(goal["attributes"]) + len(goal["goal_options"]) + 1
    assert obs.done and not obs.won and obs.reward == pytest.approx((n - len(goal["goal_options"])) / n)


@pytest.fixture(scope="module")
def splits(tmp_path_factory):
    from autorl_tui.catalog.partition_secret import secret_path

    card = load_task_card(CARD)
    cache = tmp_path_factory.mktemp("cache")
    # A fixed partition secret: the same splits on every run (a home draws its own at random, and
    # with some the first dev goals are ones the expert cannot win at reward 1.0 under goal.py's
    # reward; see docs/webshop.md)
    secret_path(cache).write_text("00" * 32)
    return card, {s: materialize(card, s, cache) for s in ("train", "dev", "test")}


def test_held_out_targets_are_never_train_targets(splits):
    _, paths = splits
    targets = {s: {g["asin"] for g in list_episodes(p)} for s, p in paths.items()}
    assert len(list_episodes(paths["train"])) == 600 and len(list_episodes(paths["test"])) == 80
    assert not targets["train"] & targets["test"] and not targets["train"] & targets["dev"]
    assert not targets["dev"] & targets["test"]
    assert (paths["train"] / "webshop_api" / "api.py").exists() and not (paths["test"] / "webshop_api").exists()


def test_the_expert_wins_at_least_95_percent_of_train_episodes(splits):
    card, paths = splits
    episodes = list_episodes(paths["train"])
    results = run_episodes(expert_generate, episodes, max_steps=card.protocol.max_steps, batch_size=64)
    won = sum(r.won for r in results)
    assert won >= 0.95 * len(results), f"expert won {won}/{len(results)}"
    assert summarize_rewards(results)["mean_reward"] >= 95
    sft = [json.loads(line) for line in (paths["train"] / "sft_chat.jsonl").read_text().splitlines()]
    assert len(sft) == sum(r.steps for r in results if r.won)
    assert sft[0]["messages"][1]["content"] == results[0].trajectory[0]["prompt"]


def small_card(tmp_path, **params):
    import yaml

    raw = yaml.safe_load(CARD.read_text())
    raw["data"]["params"].update(source="generated", per_type=6, **params)
    raw["data"]["splits"] = {"train": {"n": 60, "seed": 1}, "dev": {"n": 4, "seed": 2}, "test": {"n": 8, "seed": 3}}
    (tmp_path / "task.yaml").write_text(yaml.safe_dump(raw))
    return load_task_card(tmp_path / "task.yaml")


def test_short_product_ids_are_played_and_listed_like_long_ones(tmp_path):
    """`params.id_chars: 2` (the functional test's card): ids "B0" + 2 characters, unique, listed
    lower-case in the prompt; the expert still wins and clicks them."""
    products = C.generate_products(0, 6, id_chars=2)
    assert len({p["asin"] for p in products}) == len(products) and all(len(p["asin"]) == 4 for p in products)
    card = small_card(tmp_path, id_chars=2)
    train = materialize(card, "train", tmp_path / "cache")
    results = run_episodes(expert_generate, list_episodes(train), max_steps=8, batch_size=64)
    assert sum(r.won for r in results) >= 0.95 * len(results)
    clicks = [s["action"] for r in results for s in r.trajectory if s["action"].startswith("click[b0")]
    assert clicks and all(len(c) == len("click[b0xx]") for c in clicks)
    assert all(c[6:10] in r.trajectory[1]["prompt"] for r in results[:5] for c in [r.trajectory[1]["action"]])


@pytest.mark.parametrize("bad", [1, 9, "4"])
def test_an_id_length_out_of_range_is_refused_with_what_to_set(tmp_path, bad):
    from autorl_tui.tasks.webshop.provider import WebshopDataError, build_split

    with pytest.raises(WebshopDataError, match="id_chars must be a whole number from 2 to 8"):
        build_split(small_card(tmp_path, id_chars=bad), "train", b"s" * 32)


def test_the_environment_plays_the_split_and_a_silent_model_wins_nothing(splits):
    _, paths = splits
    env = WebshopEnvironment()
    items = [json.loads(line) for line in (paths["dev"] / "items.jsonl").read_text().splitlines()]
    episodes = env.episodes(items[:5], paths["dev"])
    results = env.run_episodes(lambda prompts: ["I do not know."] * len(prompts), episodes, max_steps=3,
                               batch_size=4, options={}, log=None)
    assert [r.steps for r in results] == [3] * 5 and not any(r.won for r in results)
    assert all(r.unmatched_steps == 3 for r in results)
    won = env.run_episodes(expert_generate, episodes, max_steps=15, batch_size=4, options={}, log=None)
    assert all(r.won and r.reward == 1.0 for r in won)
    assert env.validate_options({"history_len": -1}) and not env.validate_options({"history_len": 8})


def test_tasks_validate_webshop_passes_through_the_cli(capsys, home_dir):
    code = main(["--home", str(home_dir), "tasks", "validate", "webshop-mini"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "valid" in out


class ExpertPolicy:
    """The expert behind the grader's policy interface: it answers each chat prompt it is sent."""

    def generate(self, prompts, n=1, **kwargs):
        return [[reply] for reply in expert_generate(prompts)]


def test_env_success_scores_the_dev_split_and_stores_trajectories(splits, tmp_path):
    from autorl_tui.grading.scorers import get_scorer
    from autorl_tui.grading.types import ScorerContext

    card, paths = splits
    items = [json.loads(line) for line in (paths["dev"] / "items.jsonl").read_text().splitlines()]
    ctx = ScorerContext(task_dir=CARD.parent, split="dev", split_path=paths["dev"], scratch_dir=tmp_path,
                        options=dict(card.scorer_options), log=lambda msg: None)
    result = get_scorer("env_success").evaluate(ExpertPolicy(), items, card.protocol, ctx)
    assert result.metrics["episodes"] == 40 and result.score >= 95
    assert all(s.data["trajectory"] for s in result.samples)
    assert all(s.data["trajectory"][-1]["action"] == "click[buy now]" for s in result.samples if s.correct)


class TargetedPolicy:
    """Opens the instruction's own target product when the results show it (else does what the expert
    does), then on every other instruction (by a hash of its text) buys it at once without choosing
    the options, and otherwise chooses them as the expert does: full and partial rewards that can
    be worked out by hand."""

    def __init__(self, items):
        self.target = {it["instruction"]: it["asin"].lower() for it in items}

    @staticmethod
    def impatient(instruction: str) -> bool:
        return zlib.crc32(instruction.encode()) % 2 == 1

    def generate(self, prompts, n=1, **kwargs):
        replies = expert_generate(prompts)
        for i, prompt in enumerate(prompts):
            user = prompt[-1]["content"]
            instruction = next(line for line in user.splitlines() if line.startswith("Instruction: "))
            instruction = instruction.removeprefix("Instruction: ")
            if f"click[{self.target[instruction]}]" in user.split("Available actions: ")[-1]:
                replies[i] = f"click[{self.target[instruction]}]"
            elif self.impatient(instruction) and "click[buy now]" in user:
                replies[i] = "click[buy now]"
        return [[reply] for reply in replies]


def test_env_success_records_mean_reward_and_reward_share_in_the_score_details(splits, tmp_path):
    """WebShop's summary figures come out of a grading's details, equal to the stored episode
    records' rewards, which are checked against the reward worked out by hand for each purchase."""
    from autorl_tui.grading.scorers import get_scorer
    from autorl_tui.grading.types import ScorerContext

    card, paths = splits
    items = [json.loads(line) for line in (paths["dev"] / "items.jsonl").read_text().splitlines()]
    ctx = ScorerContext(task_dir=CARD.parent, split="dev", split_path=paths["dev"], scratch_dir=tmp_path,
                        options=dict(card.scorer_options), log=lambda msg: None)
    result = get_scorer("env_success").evaluate(TargetedPolicy(items), items, card.protocol, ctx)
    by_id = {it["id"]: it for it in items}
    checked = 0
    for s in result.samples:
        goal, actions = by_id[s.sample_id], [step["action"] for step in s.data["trajectory"]]
        bought = next((a[6:-1].upper() for a in reversed(actions) if a and a.startswith("click[b0")), None)
        if bought != goal["asin"] or actions[-1] != "click[buy now]":
            continue        # the target was not listed and the expert bought another product
        n_attr, n_opt = len(goal["attributes"]), len(goal["goal_options"])
        if TargetedPolicy.impatient(goal["instruction"]):
            # attributes and price match; no option chosen, and goal.py credits none found only in the title
            expected = (n_attr + 1) / (n_attr + n_opt + 1)
        else:
            expected = 1.0
        assert s.data["reward"] == pytest.approx(expected), (s.sample_id, actions)
        checked += 1
    rewards = [s.data["reward"] for s in result.samples]
    assert checked >= 25 and any(0 < r < 1 for r in rewards) and any(r == 1.0 for r in rewards)
    details = result.metrics["env_summary"]
    assert details["mean_reward"] == pytest.approx(100 * sum(rewards) / len(rewards))
    assert details["reward_ge_0.5"] == pytest.approx(100 * sum(r >= 0.5 for r in rewards) / len(rewards))
    assert result.score < details["reward_ge_0.5"] and result.score < details["mean_reward"] < 100


PIPELINE = Path(__file__).resolve().parents[2] / "autorl_tui" / "builtin" / "agents" / "reference" / "pipeline"


def test_sft_renaming_gives_every_product_id_one_fresh_id_throughout(tmp_path):
    """lean_sft.py's `--rename`: the same new id in the listing, the actions, the history and the
    reply; ids keep their length; the rest of the text is untouched."""
    import random
    import sys

    sys.path.insert(0, str(PIPELINE))
    try:
        from lean_sft import PRODUCT_ID, renamed
    finally:
        sys.path.remove(str(PIPELINE))
    user = "Previous actions: click[b0ab]\n\n[b0ab] Tea | $3.00\n[b0zzq7x9k2] Mug | $9.00\n\nAvailable actions: click[b0ab], click[b0zzq7x9k2]"
    prompt, action = renamed(([{"role": "system", "content": "Shop."}, {"role": "user", "content": user}], "click[b0ab]"),
                             random.Random(1))
    new_ids = PRODUCT_ID.findall(prompt[1]["content"])
    assert prompt[0]["content"] == "Shop." and "b0ab" not in prompt[1]["content"] + action
    assert new_ids[0] == new_ids[1] == new_ids[3] == action[6:-1] and new_ids[2] == new_ids[4]
    assert [len(i) for i in new_ids] == [4, 4, 10, 4, 10] and new_ids[0] != new_ids[2]
    assert PRODUCT_ID.sub("ID", prompt[1]["content"]) == PRODUCT_ID.sub("ID", user)


def test_sft_renaming_permutes_the_types_attributes_and_option_values_throughout(tmp_path):
    """lean_sft.py's `--rename` with `--catalog`: one permutation of the example's type's
    attributes and of each option group's values, applied alike to the instruction, the query, the
    title (Title Case), the option list, the history and the reply; prices, counts, shoe sizes and
    other types' words stay as they were."""
    import random
    import sys

    sys.path.insert(0, str(PIPELINE))
    try:
        from lean_sft import renamed, value_pools
    finally:
        sys.path.remove(str(PIPELINE))
    catalog = tmp_path / "catalog.jsonl"
    catalog.write_text("\n".join(json.dumps(p) for p in [
        {"name": "hoodie", "attributes": ["cotton", "fleece lined"], "options": {"color": ["black", "maroon"], "size": ["large", "x-large"]}},
        {"name": "hoodie", "attributes": ["relaxed fit"], "options": {"color": ["royal blue"], "size": ["small"]}},
        {"name": "women's running shoes", "attributes": ["lightweight"], "options": {"size": ["7", "8"]}}]) + "\n")
    pools = value_pools(catalog)
    assert pools["hoodie"] == [["cotton", "fleece lined", "relaxed fit"], ["black", "maroon", "royal blue"],
                               ["large", "small", "x-large"]]
    assert pools["women's running shoes"] == [["lightweight"], []]
    user = ("Previous actions: search[fleece lined hoodie color maroon size large] ; click[b0ab]\n\n"
            "Instruction: i need a fleece lined hoodie with color: maroon, and size: large, and price lower than 40.00 dollars\n"
            "color: [black] [maroon]\nsize: [large] [x-large]\nAmberly Casual Fleece Lined Cotton Hoodie\nPrice: $37.00 "
            "(Total results: 7) Lightweight\n\nAvailable actions: click[black], click[maroon], click[large], click[x-large]")
    seen = set()
    for seed in range(12):
        prompt, action = renamed(([{"role": "user", "content": user}], "click[maroon]"), random.Random(seed), pools)
        text = prompt[0]["content"]
        named = text.split("color: ")[1].split(",")[0]
        assert action == f"click[{named}]" and f"[{named}]" in text.split("\ncolor: ")[1]
        assert f"color {named} size" in text and "$37.00" in text and "(Total results: 7) Lightweight" in text
        assert "40.00 dollars" in text and "click[b0ab]" not in text
        lined = text.split("Instruction: i need a ")[1].split(" hoodie")[0]
        assert f"Casual {' '.join(w.capitalize() for w in lined.split())} " in text
        seen.add((named, lined))
    assert len(seen) > 3          # the permutations differ between draws
    prompt, action = renamed(([{"role": "user", "content": user}], "click[maroon]"), random.Random(0), pools, ids=False)
    assert "click[b0ab]" in prompt[0]["content"] and prompt[0]["content"] != user


@pytest.mark.slow
def test_reference_dagger_plays_train_episodes_and_the_expert_labels_each_page(tmp_path):
    """webshop_dagger.py with an untrained model: every episode played to the step limit, nothing
    won, one expert label per step, each an action the labelled page offers."""
    import subprocess
    import sys

    from autorl_tui.tasks.webshop import tiny_model

    model = tiny_model.build(tmp_path / "model")
    train = materialize(small_card(tmp_path, id_chars=2), "train", tmp_path / "cache")
    out = tmp_path / "labels.jsonl"
    proc = subprocess.run([sys.executable, str(PIPELINE / "webshop_dagger.py"), "--model", str(model), "--data", str(train),
                           "--out", str(out), "--episodes", "4", "--batch", "4", "--max_steps", "3"],
                          capture_output=True, text=True, timeout=600, env={**__import__("os").environ, "PIPELINE_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert summary["played"] == 4 and summary["won"] == 0 and summary["examples"] == len(rows) == 12, summary
    for row in rows:
        user, label = row["prompt"][-1]["content"], row["completion"][0]["content"]
        offered = user.split("Available actions: ")[1].split("\n")[0].split(", ")
        assert label in offered or (offered == ["search[...]"] and label.startswith("search[")), (label, offered)


@pytest.mark.slow
def test_reference_practice_makes_every_shop_product_a_target_and_keeps_the_experts_won_steps(tmp_path):
    """webshop_practice.py: practice instructions for every product of the shop's catalog (each
    naming the product's own attributes, option values and a bound above its price), played by
    the expert through the workspace's runner; the steps of the won episodes, in the grader's
    prompt format, are the output."""
    import subprocess
    import sys

    train = materialize(small_card(tmp_path, id_chars=2), "train", tmp_path / "cache")
    out = tmp_path / "practice.jsonl"
    proc = subprocess.run([sys.executable, str(PIPELINE / "webshop_practice.py"), "--data", str(train),
                           "--out", str(out), "--per_product", "2", "--max_steps", "8"],
                          capture_output=True, text=True, timeout=600, env={**__import__("os").environ, "PIPELINE_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    products = [json.loads(line) for line in (train / "catalog.jsonl").read_text().splitlines() if line.strip()]
    assert summary["products"] == len(products) and summary["played"] == 2 * len(products), summary
    assert summary["won"] >= 0.95 * summary["played"], summary
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == summary["examples"] > summary["won"] * 3     # search, open, buy at least
    bought, instructions = set(), set()
    for row in rows:
        user, action = row["prompt"][-1]["content"], row["completion"][0]["content"]
        offered = user.split("Available actions: ")[1].split("\n")[0].split(", ")
        assert action in offered or (offered == ["search[...]"] and action.startswith("search[")), (action, offered)
        instructions.add(user.split("Instruction: ")[1].split("\n")[0])
        if action.startswith("click[b0"):
            bought.add(action[6:-1])
    # nearly every product of the catalog was opened (the expert opens the best-fitting listing,
    # which is another product when two fit the instruction equally; 119 of 126 here)
    assert len(bought & {p["asin"].lower() for p in products}) >= 0.9 * len(products), len(bought)
    assert len(instructions) >= 0.95 * summary["won"]     # distinct practice instructions

"""Our WebAgentTextEnv (autorl_tui/tasks/webshop/webagent.py) against WebShop's own, run for real on the
same official-format catalog (tests/data/webshop/official_small/).

tests/data/webshop/text_env_reference.json was produced by `scripts/webshop_lucene_reference.py`
(see tests/unit/test_webshop_lucene_agreement.py for the scratch environment): it builds
`WebAgentTextEnv(observation_mode="text", num_products=1000)` from princeton-nlp/WebShop at 64fa2a5
after `random.seed(0)`, records its goals for sessions 0-99 and its product prices, and plays 17
scripted episodes (purchases with the goal's options, every sub-page, pagination past the last
page, invalid and malformed actions, searching from an item page, buying from a results page),
recording each step's observation, available actions, reward and done. spaCy's `en_core_web_sm`
was not installed there, so goal.py ran with a blank English pipeline (no nouns); the reward
test below gives our type reward the same pipeline (`WEBSHOP_SPACY_MODEL=blank:en`).
"""

import json
from pathlib import Path

import pytest

from autorl_tui.tasks.webshop import reward as R
from autorl_tui.tasks.webshop.webagent import WebShopText, parse_action

DATA = Path(__file__).parents[1] / "data" / "webshop"
REF = json.loads((DATA / "text_env_reference.json").read_text())


@pytest.fixture(scope="module")
def shop():
    return WebShopText.from_folder(DATA / "official_small")


@pytest.fixture
def blank_parser(monkeypatch):
    monkeypatch.setenv("WEBSHOP_SPACY_MODEL", "blank:en")
    R.reload_type_parser()
    yield
    monkeypatch.undo()
    R.reload_type_parser()


def test_sessions_0_to_99_are_webshop_s_synthetic_goals(shop):
    assert len(shop.goals) == REF["n_goals"] == 2072
    for i, goal in enumerate(REF["goals"]):
        ours = shop.goals[i]
        assert {k: ours[k] for k in goal} == goal, i
    assert shop.prices == REF["prices"]                   # price ranges drawn as WebShop draws after seed 0
    assert any(" | " in g["instruction_text"] for g in REF["goals"])


def test_another_price_seed_changes_only_bounds_and_range_prices(shop):
    other = WebShopText.from_folder(DATA / "official_small", price_seed=1)
    assert [g["asin"] for g in other.goals] == [g["asin"] for g in shop.goals]
    assert [g["goal_options"] for g in other.goals] == [g["goal_options"] for g in shop.goals]
    assert [g["price_upper"] for g in other.goals] != [g["price_upper"] for g in shop.goals]


@pytest.mark.parametrize("episode", REF["episodes"], ids=[f"session {e['session']}" for e in REF["episodes"]])
def test_every_step_shows_and_scores_what_webshop_does(shop, blank_parser, episode):
    env = shop.session(episode["session"])
    first = episode["steps"][0]
    assert env.reset() == first["observation"]
    assert env.available_actions() == first["available"]
    assert env.instruction_text() == episode["instruction"]
    for step in episode["steps"][1:]:
        result = env.step(step["action"])
        assert result.observation == step["observation"], step["action"]
        assert env.available_actions() == step["available"], step["action"]
        assert (result.reward, result.done) == (pytest.approx(step["reward"], abs=1e-12), step["done"]), step["action"]


def test_the_episodes_cover_the_pages_and_the_action_rules():
    actions = [s["action"] for e in REF["episodes"] for s in e["steps"][1:]]
    observations = " ".join(s["observation"] for e in REF["episodes"] for s in e["steps"])
    for needed in ("click[description]", "click[features]", "click[reviews]", "click[next >]", "click[< prev]",
                   "click[back to search]", "click[buy now]", "search[]", "click[search]", "choose[x]",
                   "click[attributes]", "click[Buy Now]"):
        assert needed in actions, needed
    assert "Page 6 (Total results: 50)" in observations and "Thank you for shopping with us!" in observations
    rewards = [s["reward"] for e in REF["episodes"] for s in e["steps"] if s["done"]]
    assert len(rewards) >= 15 and max(rewards) == 1.0 and min(rewards) < 0.5


def test_the_action_grammar_is_webshop_s(shop):
    assert parse_action("search[red shoes]") == ("search", "red shoes")
    assert parse_action("click[b0abc] and more") == ("click", "b0abc")
    assert parse_action("search[]") == ("search[]", None)
    assert parse_action("Search[x]") == ("Search", "x")
    env = shop.session(0)
    env.reset()
    page = env.observation()
    for invalid in ("Search[chocolate]", "search[]", "click[buy now]", "click[search]", "hello"):
        result = env.step(invalid)
        assert (result.valid, result.reward, result.done, result.observation) == (False, 0.0, False, page)
    assert env.step("search[chocolate]").observation.startswith("Instruction: [SEP] ")
    asin = env.available_actions()["clickables"][2]
    env.step(f"click[{asin}]")
    assert env.available_actions()["has_search_bar"] is False
    assert env.step("search[shampoo]").valid                 # WebShop searches from any page
    assert "Page 1 (Total results:" in env.observation()


def test_the_grader_s_runner_replays_webshop_s_episodes_to_the_same_rewards(shop, blank_parser, monkeypatch):
    """The scripted episodes played through the batched runner the grader uses (api.run_episodes), the
    actions given as a model's replies: every purchase gets WebShop's reward, in as many steps."""
    from autorl_tui.tasks.webshop import api
    monkeypatch.setattr(api, "shop_at", lambda *a, **k: shop)
    episodes = [e for e in REF["episodes"] if e["steps"][-1]["done"]]
    items = [{"id": f"session-{e['session']}", "session": e["session"], "shop": "x"} for e in episodes]
    scripts = {f"session-{e['session']}": list(e["actions"]) for e in episodes}
    instructions = {f"session-{e['session']}": e["instruction"].removeprefix("Instruction: ") for e in episodes}
    played: dict[str, int] = {}

    def generate(prompts):
        replies = []
        for messages in prompts:
            key = next(k for k in scripts if instructions[k] in messages[-1]["content"])
            replies.append(scripts[key][played.get(key, 0)] + "\nThought: done")   # only the first line counts
            played[key] = played.get(key, 0) + 1
        return replies

    records = api.run_episodes(generate, items, max_steps=50, batch_size=4)
    for record, episode in zip(records, episodes):
        assert record.error is None
        assert record.reward == pytest.approx(episode["steps"][-1]["reward"], abs=1e-12)
        assert record.steps == len(episode["actions"])


def test_the_autorl_bench_prompt_is_its_evaluator_s_to_the_character(shop, monkeypatch):
    """The reference file holds, for 4 episodes, the prompt AutoRL-Bench's own `build_react_prompt` and
    `_format_available_actions` (executed from its eval.py, microsoft/RD-Agent 471eb30) built before each
    step, and its chat system message; the grader's runner sends the same."""
    from autorl_tui.tasks.webshop import api
    monkeypatch.setattr(api, "shop_at", lambda *a, **k: shop)
    episodes = [e for e in REF["episodes"] if "autorl_bench_prompts" in e]
    assert len(episodes) == 4 and max(len(e["actions"]) for e in episodes) > 5      # the window of 5 is reached
    for episode in episodes:
        sent: list = []
        api.run_episodes(_replay(episode["actions"], sent), [{"id": "e", "session": episode["session"], "shop": "x"}], max_steps=50,
                         history_len=5, prompt="autorl-bench")
        assert [m[0]["content"] for m in sent] == [REF["autorl_bench_system"]] * len(sent)
        assert [m[1]["content"] for m in sent] == episode["autorl_bench_prompts"]


def _replay(actions: list[str], sent: list):
    """A one-episode `generate` replying the scripted actions in turn, keeping the prompts it was sent."""
    def generate(prompts):
        sent.extend(prompts)
        return [actions[len(sent) - 1]]
    return generate


def test_the_expert_reads_the_autorl_bench_prompt_and_buys(shop, monkeypatch):
    from autorl_tui.tasks.webshop import api
    from autorl_tui.tasks.webshop.experts import expert_generate
    monkeypatch.setattr(api, "shop_at", lambda *a, **k: shop)
    items = [{"id": f"session-{i}", "session": i, "shop": "x"} for i in range(20)]
    records = api.run_episodes(expert_generate, items, max_steps=50, history_len=5, prompt="autorl-bench")
    assert sum(r.reward >= 0.5 for r in records) >= 18 and all(r.steps <= 10 for r in records)

"""Our WebShop reward agrees with WebShop's own `get_reward` (web_agent_site/engine/goal.py).

The reference rewards in tests/data/webshop/goal_reference.json were produced by running WebShop's
goal.py for real: princeton-nlp/WebShop at 64fa2a5 fetched, `scripts/webshop_goal_reference.py`
run in a scratch venv outside the project (`python -m venv /tmp/wsref/venv`, then
`pip install thefuzz==0.19.0 rich spacy`: thefuzz on difflib as WebShop pins it), importing
goal.py from the checkout and calling `get_reward` on every case. The official spaCy model
`en_core_web_sm` could not be installed offline, so a blank English pipeline stood in for it at
goal.py's import; every case buys a product with the goal's own name and query, so goal.py's type
reward is 1.0 under any tagger, and the cases test what they are about: fuzzy sizes and packs,
colours, attributes, title-only options and price bounds, under goals holding their options as a
mapping (WebShop's synthetic goals, matched by (name, value) pairs) and as a list (human goals).
"""

import json
from pathlib import Path

import pytest

from autorl_tui.tasks.webshop import reward as R

TABLE = json.loads((Path(__file__).parents[1] / "data" / "webshop" / "goal_reference.json").read_text())
CASES = TABLE["cases"]


def test_the_table_covers_what_it_must():
    notes = " ".join(c["note"] for c in CASES)
    assert len(CASES) >= 40
    for topic in ("x-large", "pack of", "10.5", "navy blue", "gray", "machine wash", "only in the title",
                  "bound", "list", "map"):
        assert topic in notes, topic
    verdicts = {c["webshop_reward"] >= 0.5 for c in CASES}
    assert verdicts == {True, False}


@pytest.mark.parametrize("case", CASES, ids=[f"{c['id']} {c['note']}" for c in CASES])
def test_the_reward_is_goal_py_s(case):
    ours = R.reward(case["product"], case["goal"], case["price"], case["chosen"])
    assert ours == pytest.approx(case["webshop_reward"], abs=0.01)
    assert (ours >= 0.5) == (case["webshop_reward"] >= 0.5)


def _pairs():
    for c in CASES:
        goal_items = [R.normalize_color(o) for o in R.goal_option_items(c["goal"])]
        for bought in c["chosen"].values():
            for wanted in goal_items:
                yield R.normalize_color(bought), wanted
        for attr in c["goal"]["attributes"]:
            for have in c["product"]["attributes"]:
                yield have, attr
    yield "café crème", "cafe creme"          # Latin-1 letters dropped, as thefuzz's force_ascii does
    yield "snake_case size", "snake case"     # an underscore is a word character
    yield "", "large"
    yield ("size", "x-large"), ("size", "x-large")


def test_the_standard_library_matcher_gives_thefuzz_s_figures():
    assert R.token_set_ratio.__module__ == "thefuzz.fuzz"     # the grader's matcher is thefuzz itself
    pairs = list(_pairs())
    assert len(pairs) > 60
    for a, b in pairs:
        assert R._token_set_ratio(a, b) == R.token_set_ratio(a, b), (a, b)


@pytest.fixture
def spacy_model(monkeypatch):
    def use(name):
        monkeypatch.setenv("WEBSHOP_SPACY_MODEL", name)
        R.reload_type_parser()
    yield use
    monkeypatch.delenv("WEBSHOP_SPACY_MODEL", raising=False)
    R.reload_type_parser()


RACK = {"name": "wall towel rack", "query": "towel rack", "product_category": "Home › Storage › Racks"}
TOWEL_GOAL = {"name": "large towel set", "query": "bath towel", "product_category": "Home › Bath › Towels"}


def test_without_the_model_the_name_s_words_stand_in_for_its_nouns(spacy_model):
    spacy_model("no_such_spacy_model_here")
    assert R.type_parser() == "words (no_such_spacy_model_here not installed)"
    assert R.nouns("large towel set") == ["large", "towel", "set"]
    # 1 of 3 words shared (over a fifth): the right type
    assert R.type_reward(RACK, TOWEL_GOAL) == 1.0


def test_with_a_spacy_pipeline_only_its_nouns_count(spacy_model, tmp_path):
    """A real spaCy pipeline saved to disk and loaded by path: it tags `towel` and `rack` as nouns."""
    import spacy
    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("attribute_ruler")
    ruler.add([[{"LOWER": {"IN": ["towel", "rack", "set"]}}]], {"POS": "NOUN"})
    nlp.to_disk(tmp_path / "pipe")
    spacy_model(str(tmp_path / "pipe"))
    assert R.type_parser() == f"spacy:{tmp_path / 'pipe'}"
    assert R.nouns("large towel set") == ["towel", "set"]
    # 1 of 2 nouns shared: over a fifth, the right type
    assert R.type_reward(RACK, TOWEL_GOAL) == 1.0
    # no noun shared: nothing, even with the same query
    assert R.type_reward({**RACK, "name": "wall rack", "query": "bath towel"}, TOWEL_GOAL) == 0.0
    # an untagged name (no nouns): title score 0.2, the type then rests on query or category
    untagged = {**TOWEL_GOAL, "name": "large blue"}
    assert R.type_reward(RACK, untagged) == 0.5
    assert R.type_reward({**RACK, "query": "bath towel"}, untagged) == 1.0

"""WebShop's purchase reward against hand-computed cases (goal.py's own figures: test_webshop_goal_agreement.py)."""

import pytest

from autorl_tui.tasks.webshop.reward import reward

CHOC_PATH = "Grocery & Gourmet Food › Snacks & Sweets › Chocolate"


def product(**kw):
    base = {"asin": "B000000001", "name": "dark chocolate bar", "query": "dark chocolate bar",
            "product_category": CHOC_PATH, "title": "Northpeak Premium Gluten Free Organic Dark Chocolate Bar",
            "price": 12.5, "attributes": ["gluten free", "organic"],
            "options": {"flavor": ["sea salt", "mint"], "size": ["3.5 ounce (pack of 6)", "3.5 ounce (pack of 12)"]},
            "features": ["Gluten Free: made to be gluten free."], "description": "A bar."}
    return base | kw


def goal(**kw):
    base = {"name": "dark chocolate bar", "query": "dark chocolate bar", "product_category": CHOC_PATH,
            "attributes": ["gluten free", "organic"],
            "goal_options": {"flavor": "sea salt", "size": "3.5 ounce (pack of 12)"}, "price_upper": 20.0}
    return base | kw


RIGHT = {"flavor": "sea salt", "size": "3.5 ounce (pack of 12)"}


def test_the_right_product_with_the_right_options_under_budget_earns_one():
    value, parts = reward(product(), goal(), 12.5, RIGHT, verbose=True)
    assert value == 1.0
    assert parts == {"r_type": 1.0, "attributes": 2, "options": 2, "price": 1, "out_of": 5}


def test_a_missing_attribute_costs_one_part_in_five():
    p = product(attributes=["gluten free"], title="Northpeak Premium Gluten Free Dark Chocolate Bar")
    assert reward(p, goal(), 12.5, RIGHT) == pytest.approx(4 / 5)


def test_an_attribute_named_only_in_the_title_counts():
    p = product(attributes=["gluten free"], title="Northpeak Organic Gluten Free Dark Chocolate Bar")
    assert reward(p, goal(), 12.5, RIGHT) == 1.0


def test_wrong_or_missing_options():
    assert reward(product(), goal(), 12.5, {"flavor": "mint", "size": "3.5 ounce (pack of 12)"}) == pytest.approx(4 / 5)
    assert reward(product(), goal(), 12.5, {}) == pytest.approx(3 / 5)


def test_options_match_fuzzily_as_goal_py_matches_them():
    g = goal(goal_options={"size": "x-large"}, attributes=["organic"])
    assert reward(product(), g, 12.5, {"size": "large"}) == 1.0            # "large" is in ("size", "x-large")
    assert reward(product(), g, 12.5, {"size": "small"}) == pytest.approx(2 / 3)
    g = goal(goal_options={"flavor": "sea salt"}, attributes=["organic"])
    assert reward(product(), g, 12.5, {"flavor": "Sea  Salt"}) == 1.0


def test_a_goal_option_named_only_in_the_title_is_not_credited():
    g = goal(goal_options={"flavor": "sea salt"}, attributes=["organic"])
    p = product(title="Northpeak Organic Dark Chocolate Bar, Sea Salt")
    assert reward(p, g, 12.5, {}) == pytest.approx(2 / 3)


def test_over_the_price_bound_loses_the_price_part():
    assert reward(product(), goal(price_upper=10.0), 12.5, RIGHT) == pytest.approx(4 / 5)


def test_the_wrong_type_earns_nothing():
    shampoo = product(name="shampoo", query="shampoo", title="Amberly Gluten Free Organic Shampoo",
                      product_category="Beauty & Personal Care › Hair Care › Shampoo")
    value, parts = reward(shampoo, goal(), 12.5, RIGHT, verbose=True)
    assert parts["r_type"] == 0.0 and value == 0.0


def test_a_weak_type_match_halves_the_reward():
    # 1 of the goal type's 6 words (1/6: over 0.1, not over 0.2), another query and category: r_type 0.5
    rack = product(name="towel rack", query="towel rack", title="Wall Mounted Towel Rack",
                   product_category="Home & Kitchen › Storage › Racks", attributes=["wall mounted"], options={})
    g = goal(name="large blue cotton bath towel set", query="bath towel",
             product_category="Home & Kitchen › Bath › Towels", attributes=["wall mounted"], goal_options={})
    value, parts = reward(rack, g, 12.5, {}, verbose=True)
    assert parts["r_type"] == 0.5
    assert value == pytest.approx(0.5 * (1 + 0 + 1) / (1 + 0 + 1))


def test_a_shared_category_keeps_the_type_when_few_words_match():
    # same two category levels: a weak title overlap still counts as the right type
    p = product(name="milk chocolate bar", query="milk chocolate", title="Amberly Gluten Free Organic Milk Chocolate Bar")
    g = goal(name="dark cocoa truffle bar assortment box gift", query="truffles")
    assert reward(p, g, 12.5, RIGHT, verbose=True)[1]["r_type"] == 1.0

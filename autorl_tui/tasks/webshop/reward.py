"""WebShop's reward for a purchase (Yao et al., 2022, section 3.2), standard library only.

    reward = r_type * (matched attributes + matched options + [price <= bound])
                    / (goal attributes + goal options + 1)

- r_type: 1.0 when the bought product is the goal's type (same search query, or two levels of its
  category path in common, or more than a fifth of the goal type's words in its name); 0.5 when
  only some of the words are shared; 0.1 when under a tenth; 0.0 when none.
- an attribute matches when it is one of the product's attributes (token-set equal: one phrase's
  words contain the other's), or appears in its title, features or description;
- a goal option matches when a chosen option value equals it (exactly for `size`, token-set equal
  otherwise), or it appears in the product's title. Unlike the original, which counts chosen
  options, goal options are counted, so the reward never exceeds 1.
"""

from __future__ import annotations

import re

EXACT_MATCH_OPTIONS = ("size",)
_STOP = {"a", "an", "the", "of", "for", "and", "with", "in", "s", "men", "women"}


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+(?:\.[0-9]+)?", (text or "").lower())


def token_set_equal(a: str, b: str) -> bool:
    wa, wb = set(words(a)), set(words(b))
    return bool(wa and wb) and (wa <= wb or wb <= wa)


def type_reward(product: dict, goal: dict) -> float:
    query_match = bool(goal.get("query")) and product.get("query") == goal.get("query")
    cat_p = {c.strip() for c in (product.get("product_category") or "").split("›") if c.strip()}
    cat_g = {c.strip() for c in (goal.get("product_category") or "").split("›") if c.strip()}
    category_match = len(cat_p & cat_g) >= 2
    want = [w for w in words(goal.get("name", "")) if w not in _STOP]
    have = set(words(product.get("name", ""))) | set(words(product.get("title", "")))
    title_score = (len(set(want) & have) / len(set(want))) if want else 0.2
    r = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    if title_score < 0.1:
        r = 0.1
    if title_score == 0.0:
        r = 0.0
    return r


def attribute_matches(product: dict, goal: dict) -> int:
    text = " ".join([product.get("title", ""), " ".join(product.get("features") or []),
                     product.get("description", "")]).lower()
    n = 0
    for attr in goal.get("attributes") or []:
        if any(token_set_equal(attr, a) for a in product.get("attributes") or []) or attr.lower() in text:
            n += 1
    return n


def option_matches(product: dict, goal: dict, chosen: dict) -> int:
    title = (product.get("title") or "").lower()
    n = 0
    for group, value in (goal.get("goal_options") or {}).items():
        hit = False
        for c_group, c_value in (chosen or {}).items():
            if c_group.lower() in EXACT_MATCH_OPTIONS or group.lower() in EXACT_MATCH_OPTIONS:
                hit = c_value.lower() == value.lower()
            else:
                hit = token_set_equal(c_value, value)
            if hit:
                break
        if hit or value.lower() in title:
            n += 1
    return n


def reward(product: dict, goal: dict, price: float, chosen: dict, verbose: bool = False):
    """The reward of buying `product` at `price` with options `chosen` ({group: value})."""
    r_type = type_reward(product, goal)
    n_attr = attribute_matches(product, goal)
    n_opt = option_matches(product, goal, chosen)
    r_price = 1 if price <= float(goal.get("price_upper", 1e9)) else 0
    total = len(goal.get("attributes") or []) + len(goal.get("goal_options") or {}) + 1
    value = r_type * (n_attr + n_opt + r_price) / total
    if verbose:
        return value, {"r_type": r_type, "attributes": n_attr, "options": n_opt, "price": r_price,
                       "out_of": total}
    return value

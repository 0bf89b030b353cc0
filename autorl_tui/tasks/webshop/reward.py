"""WebShop's reward for a purchase, as `get_reward` in WebShop's web_agent_site/engine/goal.py computes it.

    reward = r_type * (matched attributes + matched goal options + [price <= bound])
                    / (goal attributes + goal options + 1)

- r_type (the product's type): 1.0 when the bought product has the goal's search query, or two
  levels of its category path, or more than a fifth of the nouns of the goal's product name in
  its own name; 0.5 when none of these holds; 0.1 when under a tenth of those nouns are shared;
  0.0 when none is. Nouns come from spaCy with the English model WebShop uses (`en_core_web_sm`,
  or the pipeline named by $WEBSHOP_SPACY_MODEL) where it is installed; without it the name's
  words other than a few stop words stand in for its nouns (`type_parser()` says which is used;
  both give 1.0 when the two names are the same).
- an attribute matches when thefuzz's token-set ratio with one of the product's attributes is
  over 85, or when it is (case-sensitively, as in goal.py) a substring of the product's lower-cased
  title, features or description;
- a goal option matches when thefuzz's token-set ratio with one chosen option value is over 85,
  after colour normalisation (the first of WebShop's colour words found in the text). As in
  goal.py, a goal holding its options as a {name: value} mapping (WebShop's synthetic goals) is
  matched by its (name, value) pairs, a goal holding a list (the human goals) by its values. A goal
  option named only in the product's title is not credited.

thefuzz (0.19.0, WebShop's pin, on difflib) is used where installed; where it is not (an agent's
workspace holding a copy of this module), `token_set_ratio` below computes the same figure.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import warnings

SPACY_MODEL_DEFAULT = "en_core_web_sm"
NOUN_TAGS = ("PNOUN", "NOUN", "PROPN")
MATCH_ABOVE = 85
# WebShop's colour words (normalize.py's COLOR_SET), in its order: the first found names the colour.
COLOR_SET = (
    "alabaster apricot aqua ash asphalt azure banana beige black blue blush bordeaux bronze brown burgundy camel "
    "camo caramel champagne charcoal cheetah chestnut chocolate christmas coffee cognac copper coral cranberry "
    "cream crystal dark denim eggplant elephant espresso fuchsia gold granite grape graphite grass gray green grey "
    "heather indigo ivory ivy khaki lavender lemon leopard light lilac lime magenta maroon mauve merlot midnight "
    "mint mocha multicolor mushroom mustard natural navy nude olive orange peach pewter pink plum purple rainbow "
    "red rose royal rust sand sapphire seashell silver skull slate steel stone stonewash sunflower tan taupe teal "
    "tiger turquoise violet walnut wheat white wine yellow").split()
_STOP = {"a", "an", "the", "of", "for", "and", "with", "in", "s", "men", "women"}


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+(?:\.[0-9]+)?", (text or "").lower())


def _process(value) -> str:
    """thefuzz's full_process with force_ascii: non-strings as str(), Latin-1 high characters dropped."""
    text = value if isinstance(value, str) else str(value)
    text = text.translate({c: None for c in range(128, 256)})
    return re.sub(r"(?ui)\W", " ", text).lower().strip()


def _ratio(a: str, b: str) -> int:
    if a == b:
        return 100
    if not a or not b:
        return 0
    return int(round(100 * difflib.SequenceMatcher(None, a, b).ratio()))


def _token_set_ratio(a, b) -> int:
    p1, p2 = _process(a), _process(b)
    if not p1 or not p2:
        return 0
    t1, t2 = set(p1.split()), set(p2.split())
    sect = " ".join(sorted(t1 & t2))
    one = (sect + " " + " ".join(sorted(t1 - t2))).strip()
    two = (sect + " " + " ".join(sorted(t2 - t1))).strip()
    return max(_ratio(sect, one), _ratio(sect, two), _ratio(one, two))


try:
    with warnings.catch_warnings():   # thefuzz warns that it runs on difflib, as WebShop's install does
        warnings.simplefilter("ignore")
        from thefuzz.fuzz import token_set_ratio
except ImportError:  # pragma: no cover - the agent's workspace copy without thefuzz
    token_set_ratio = _token_set_ratio


def normalize_color(value):
    """normalize.py's normalize_color: the first colour word `in` the value (a substring of a string,
    an element of a (name, value) pair), else the value unchanged."""
    return next((c for c in COLOR_SET if c in value), value)


@functools.lru_cache(maxsize=None)
def _spacy_pipeline():
    name = os.environ.get("WEBSHOP_SPACY_MODEL") or SPACY_MODEL_DEFAULT
    try:
        import spacy
        return name, spacy.load(name)
    except Exception:   # spaCy or the model not installed: OSError, ImportError, a bad pipeline folder
        return name, None


def reload_type_parser() -> None:
    """Forget the loaded pipeline, so that the next type reward reads $WEBSHOP_SPACY_MODEL again."""
    _spacy_pipeline.cache_clear()


def type_parser() -> str:
    """Which noun source the type reward uses: `spacy:<model>` or `words (<model> not installed)`."""
    name, nlp = _spacy_pipeline()
    return f"spacy:{name}" if nlp is not None else f"words ({name} not installed)"


def nouns(text: str) -> list[str]:
    _, nlp = _spacy_pipeline()
    if nlp is None:
        return [w for w in words(text) if w not in _STOP]
    return [t.text.lower() for t in nlp(text) if t.pos_ in NOUN_TAGS]


def type_reward(product: dict, goal: dict) -> float:
    query_match = product.get("query") == goal.get("query")
    cat_p = {c.strip() for c in (product.get("product_category") or "").split("›")}
    cat_g = {c.strip() for c in (goal.get("product_category") or "").split("›")}
    category_match = len(cat_p & cat_g) >= 2
    have, want = nouns(product.get("name", "")), nouns(goal.get("name", ""))
    title_score = len(set(have) & set(want)) / len(want) if want else 0.2
    r = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    if title_score < 0.1:
        r = 0.1
    if title_score == 0.0:
        r = 0.0
    return r


def attribute_matches(product: dict, goal: dict) -> int:
    title = (product.get("title") or "").lower()
    features = " ".join(product.get("features") or []).lower()
    description = (product.get("description") or "").lower()
    n = 0
    for attr in goal.get("attributes") or []:
        if any(token_set_ratio(a, attr) > MATCH_ABOVE for a in product.get("attributes") or []):
            n += 1
        elif attr in title or attr in features or attr in description:
            n += 1
    return n


def goal_option_items(goal: dict) -> list:
    """The goal's options as goal.py hands them to the matcher: a mapping's (name, value) pairs, a list's values."""
    options = goal.get("goal_options") or {}
    return list(options.items()) if isinstance(options, dict) else list(options)


def option_matches(goal: dict, chosen: dict) -> int:
    bought = [normalize_color(v) for v in (chosen or {}).values()]
    wanted = [normalize_color(o) for o in goal_option_items(goal)]
    return sum(any(token_set_ratio(b, w) > MATCH_ABOVE for b in bought) for w in wanted)


def reward(product: dict, goal: dict, price: float, chosen: dict, verbose: bool = False):
    """The reward of buying `product` at `price` with options `chosen` ({group: value})."""
    r_type = type_reward(product, goal)
    n_attr = attribute_matches(product, goal)
    n_opt = option_matches(goal, chosen)
    r_price = 1 if price <= float(goal.get("price_upper", 1_000_000)) else 0
    total = len(goal.get("attributes") or []) + len(goal.get("goal_options") or {}) + 1
    value = (n_attr + n_opt + r_price) / total * r_type     # in goal.py's order, to the last bit
    if verbose:
        return value, {"r_type": r_type, "attributes": n_attr, "options": n_opt, "price": r_price,
                       "out_of": total}
    return value

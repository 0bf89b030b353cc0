"""WebShop's `WebAgentTextEnv(observation_mode="text", num_products=1000)` as AutoRL-Bench runs it:
its products, synthetic goals and sessions, its pages' text, its action grammar and its search.

Written from WebShop's code (princeton-nlp/WebShop 64fa2a5: web_agent_site/envs/web_agent_text_env.py,
engine/engine.py, engine/goal.py, templates/*.html), none of it copied; checked against the real
environment run on the same catalog (tests/unit/test_webshop_text_env.py,
scripts/webshop_lucene_reference.py). Standard library only.

- **Products** (`load_products`): `items_shuffle*.json` cut to the first `num_products` records, a
  record with asin `nan`, an asin over 10 characters or an asin seen before dropped; price tags as
  WebShop writes them (`$25.01`, `$31.8`, `$12.99 to $17.5`; no price: `$100.0`, costing 100.0);
  option values stripped, `/` written ` | `, lower case; attributes from `items_ins_v2*.json`
  (`DUMMY_ATTR` without), its `instruction` and `instruction_attributes`.
- **Prices and goals** (`product_prices`, `synthetic_goals`): a product listed with a price range
  costs a uniform draw in it; each product with an instruction gets a price bound (the larger of two
  of the first four multiples of ten above its price) and one goal per combination of its option
  values (`"<instruction> with <name>: <value>, and ..., and price lower than B dollars"`, names
  sorted); the goals are shuffled with seed 233 and session i plays goal i. **Named difference**:
  WebShop draws those prices and bounds from Python's global random state, unseeded, so they change
  from one run to the next; here they come from `random.Random(price_seed)` (0 by default), drawn in
  WebShop's order, which is what WebShop gives after `random.seed(price_seed)`.
- **Search**: the index WebShop builds (`search_engine/`): the first 1,000 distinct products of the
  whole file, each document `title description first-bullet options` lower-cased, ranked as its
  Lucene BM25 ranks them (lucene.py), the top 50 that are in the shop, 10 per page.
- **Pages** (`observation`): the visible strings of WebShop's HTML page, stripped and joined with
  ` [SEP] `, as its `text` observation mode: the search page (`WebShop [SEP] Instruction: [SEP] ...
  [SEP] Search`), results (`Back to Search`, `Page 1 (Total results: 50)`, `< Prev` after page 1,
  `Next >` always, then asin, title and price of each listed product), the item page (each option
  group's name and values, title, `Price: ...`, `Rating: N.A.`, `Description`, `Features`,
  `Reviews`, `Buy Now`), its sub-pages and the done page.
- **Actions** (`step`): `name[arg]` read as WebShop reads it (the argument lower-cased);
  `search[...]` with a non-empty argument searches from ANY page (the search bar is shown only on
  the search page, but WebShop does not check); `click[x]` acts when x is one of the page's
  clickables (`available_actions()`), other than `search`; anything else changes nothing, reward 0.
  `click[buy now]` ends the episode with goal.py's reward (reward.py).
"""

from __future__ import annotations

import itertools
import json
import random
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from .lucene import LuceneIndex
from .reward import reward as purchase_reward
from .shop import Observation

SEARCH_RETURN_N = 50
PER_PAGE = 10
INDEX_SIZE = 1000          # search_engine/run_indexing.sh's indexes_1k: the first 1,000 documents
PRICE_RANGE = [10.0 * i for i in range(1, 100)]
GOAL_SHUFFLE_SEED = 233
BUY, NEXT, PREV, BACK = "buy now", "next >", "< prev", "back to search"
SUB_PAGES = ("description", "features", "reviews")
_ACTION = re.compile(r"(.+)\[(.+)\]")


def parse_action(action: str) -> tuple[str, str | None]:
    """(name, argument) as WebShop's parse_action reads `name[argument]`; (action, None) otherwise."""
    m = _ACTION.match(action)
    return (m.group(1), m.group(2)) if m else (action, None)


def _price_tag(pricing) -> tuple[list[float], str]:
    if not pricing:
        return [100.0], "$100.0"
    values = [float(Decimal(re.sub(r"[^\d.]", "", piece))) for piece in str(pricing).split("$")[1:]]
    if len(values) == 1:
        return values, f"${values[0]}"
    return values[:2], f"${values[0]} to ${values[1]}"


def load_products(raw: list[dict], attributes: dict, num_products: int | None = None) -> list[dict]:
    """WebShop's load_products over the records of items_shuffle and items_ins_v2 (synthetic goals)."""
    if num_products is not None:
        raw = raw[:num_products]
    seen, products = set(), []
    for p in raw:
        asin = p["asin"]
        if asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        bullets = p.get("small_description")
        pricing, tag = _price_tag(p.get("pricing"))
        options = {}
        for name, contents in (p.get("customization_options") or {}).items():
            if contents is None:
                continue
            options[name.lower()] = [c["value"].strip().replace("/", " | ").lower() for c in contents]
        ins = attributes.get(asin) or {}
        products.append({
            "asin": asin, "name": p["name"], "Title": p["name"], "category": p["category"],
            "query": p["query"].lower().strip(), "product_category": p["product_category"],
            "Description": p.get("full_description") or "",
            "BulletPoints": bullets if isinstance(bullets, list) else [bullets],
            "pricing": pricing, "Price": tag, "options": options,
            "Attributes": ins["attributes"] if "attributes" in ins else ["DUMMY_ATTR"],
            "instruction_text": ins.get("instruction"), "instruction_attributes": ins.get("instruction_attributes"),
        })
    return products


def document(product: dict) -> str:
    """The text WebShop indexes for a product (search_engine/convert_product_file_format.py)."""
    option_text = ", and ".join(f"{name}: {', '.join(values)}" for name, values in product["options"].items())
    first_bullet = product["BulletPoints"][0] if product["BulletPoints"] else ""
    return " ".join([product["Title"], product["Description"], first_bullet or "", option_text]).lower()


def product_prices(products: list[dict], rng: random.Random) -> dict[str, float]:
    return {p["asin"]: (p["pricing"][0] if len(p["pricing"]) == 1 else rng.uniform(*p["pricing"][:2]))
            for p in products}


def synthetic_goals(products: list[dict], prices: dict[str, float], rng: random.Random) -> list[dict]:
    """get_synthetic_goals: one goal per option combination of each product with an instruction."""
    goals = []
    for p in products:
        if p["instruction_text"] is None:
            continue
        above = [x for x in PRICE_RANGE if x > prices[p["asin"]]][:4]
        if len(above) >= 2:
            upper = sorted(rng.sample(above, 2))[1]
            price_text = f", and price lower than {upper:.2f} dollars"
        else:
            upper, price_text = 1000000, ""
        names = sorted(p["options"])
        for combination in itertools.product(*(p["options"][n] for n in names)):
            goal_options = dict(zip(names, combination))
            option_text = ", and ".join(f"{k}: {v}" for k, v in goal_options.items())
            option_text = " with " + option_text if option_text else ""
            goals.append({"asin": p["asin"], "category": p["category"], "query": p["query"], "name": p["Title"],
                          "product_category": p["product_category"],
                          "instruction_text": f"{p['instruction_text']}{option_text}{price_text}",
                          "attributes": p["instruction_attributes"], "price_upper": upper,
                          "goal_options": goal_options})
    return goals


def _find(root: Path, stem: str) -> Path:
    hits = sorted(Path(root).glob(f"{stem}*.json"))
    if not hits:
        raise FileNotFoundError(f"no {stem}*.json in {root}")
    return hits[0]


class WebShopText:
    """The shop of one WebAgentTextEnv: products, prices, goals (sessions) and the search index."""

    def __init__(self, raw: list[dict], attributes: dict, num_products: int | None = 1000, price_seed: int = 0):
        self.products = load_products(raw, attributes, num_products)
        self.by_asin = {p["asin"]: p for p in self.products}
        rng = random.Random(price_seed)
        self.prices = product_prices(self.products, rng)
        self.goals = synthetic_goals(self.products, self.prices, rng)
        random.Random(GOAL_SHUFFLE_SEED).shuffle(self.goals)
        indexed = load_products(raw, attributes, None)[:INDEX_SIZE]
        self.index = LuceneIndex([(p["asin"], document(p)) for p in indexed])

    @classmethod
    def from_folder(cls, root: str | Path, num_products: int | None = 1000, price_seed: int = 0) -> "WebShopText":
        raw = json.loads(_find(Path(root), "items_shuffle").read_text())
        attributes = json.loads(_find(Path(root), "items_ins_v2").read_text())
        return cls(raw, attributes, num_products, price_seed)

    def search(self, keywords: list[str], rng: random.Random) -> list[dict]:
        """get_top_n_product_from_keywords: `<r>` 50 at random, `<c> category`, `<q> query`, else BM25."""
        head = keywords[0]
        if head == "<r>":
            return rng.sample(self.products, k=SEARCH_RETURN_N)
        if head == "<c>":
            return [p for p in self.products if p["category"] == keywords[1].strip()]
        if head == "<q>":
            query = " ".join(keywords[1:]).strip()
            return [p for p in self.products if p["query"] == query]
        if head == "<a>":
            raise ValueError("WebShop's `<a>` search needs an attribute table its text environment does not pass")
        hits = self.index.search(" ".join(keywords), k=SEARCH_RETURN_N)
        return [self.by_asin[asin] for asin, _ in hits if asin in self.by_asin]

    def session(self, i: int, rng_seed: int = 0) -> "TextEpisode":
        return TextEpisode(self, self.goals[i], random.Random(rng_seed))


def _segments(value) -> list[str]:
    """A template value's text as WebShop's observation keeps it: stripped; a whitespace-only value
    counts as an empty segment unless it holds a newline (BeautifulSoup collapses it to one), and an
    empty one is no text at all."""
    text = "" if value is None else str(value)
    if not text:
        return []
    if not text.strip():
        return [] if "\n" in text else [""]
    return [text.strip()]


def _tojson(value) -> str:
    """Flask's `tojson` filter: sorted keys, ASCII, <, >, & and ' escaped."""
    text = json.dumps(value, sort_keys=True)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("'", "\\u0027")):
        text = text.replace(ch, esc)
    return text


@dataclass
class StepResult:
    observation: str
    reward: float
    done: bool
    valid: bool
    info: dict = field(default_factory=dict)


class TextEpisode:
    """One session: reset(), then step(action) -> StepResult; available_actions() as WebShop's."""

    def __init__(self, shop: WebShopText, goal: dict, rng: random.Random):
        self.shop, self.goal, self.rng = shop, goal, rng
        self.instruction = goal["instruction_text"]
        self.reset()

    def reset(self) -> str:
        self.page = "index"
        self.keywords: list[str] = []
        self.page_no = 1
        self.results: list[dict] = []
        self.asin = ""
        self.options: dict[str, str] = {}
        self.sub: str | None = None
        self.reward, self.done = 0.0, False
        return self.observation()

    def instruction_text(self) -> str:
        """get_instruction_text(): the page's instruction heading, `Instruction: ...`."""
        return f"Instruction: {self.instruction}"

    # ---- what the page shows ----
    def _item(self) -> dict:
        return self.shop.by_asin[self.asin]

    def _listed(self) -> list[dict]:
        start = (self.page_no - 1) * PER_PAGE
        return self.results[start:start + PER_PAGE]

    def _option_groups(self) -> dict[str, str]:
        """Clickable option value -> its group (a value in two groups belongs to the last, as in WebShop)."""
        groups: dict[str, str] = {}
        for name, values in self._item()["options"].items():
            for v in values:
                groups[v] = name
        return groups

    def clickables(self) -> list[str]:
        if self.page == "index":
            return ["search"]
        if self.page == "results":
            nav = [BACK] + ([PREV] if self.page_no > 1 else []) + [NEXT]
            return nav + [p["asin"].lower() for p in self._listed()]
        if self.page == "item":
            out = [BACK, PREV, *SUB_PAGES, BUY]
            out += [v for v in self._option_groups() if v not in out]
            return out
        if self.page == "sub":
            return [BACK, PREV]
        return []

    def available_actions(self) -> dict:
        return {"has_search_bar": self.page == "index", "clickables": self.clickables()}

    def observation(self) -> str:
        head = ["Instruction:", *_segments(self.instruction)]
        if self.page == "index":
            parts = ["WebShop", *head, "Search"]
        elif self.page == "results":
            parts = [*head, "Back to Search", f"Page {self.page_no} (Total results: {len(self.results)})"]
            parts += (["< Prev"] if self.page_no > 1 else []) + ["Next >"]
            for p in self._listed():
                parts += [*_segments(p["asin"]), *_segments(p["Title"]), *_segments(p["Price"])]
        elif self.page == "item":
            p = self._item()
            parts = [*head, "Back to Search", "< Prev"]
            for name, values in p["options"].items():
                parts += _segments(name)
                for v in values:
                    parts += _segments(v)
            parts += [*_segments(p["Title"]), f"Price: {p['Price']}".strip(), "Rating: N.A.",
                      "Description", "Features", "Reviews", "Buy Now"]
        elif self.page == "sub":
            p = self._item()
            parts = [*head, "Back to Search", "< Prev"]
            if self.sub == "description":
                parts += _segments(p["Description"])
            elif self.sub == "features":
                for bullet in p["BulletPoints"]:
                    parts += _segments(f" {'' if bullet is None else bullet}")
        else:
            parts = ["Thank you for shopping with us!", "Your code:", "None", "(Paste it in your MTurk interface.)",
                     "Purchased", "asin", *_segments(self.asin), "options", _tojson(self.options), "attrs", "None",
                     "category", "None", "query", "None", "product category", "None", "Target", "asin", "options",
                     "attrs", "price upper", "instuction text", "category", "product category", "query", "Goal",
                     "None", "Reward", "Your score (min 0.0, max 1.0)", str(self.reward), "Reward Details", "None"]
        return " [SEP] ".join(parts)

    # ---- acting ----
    def _search(self, keywords: list[str], page: int) -> None:
        self.results = self.shop.search(keywords, self.rng)
        self.keywords, self.page_no, self.page = keywords, page, "results"
        self.asin, self.options = "", {}

    def step(self, action: str) -> StepResult:
        name, arg = parse_action(action)
        if arg is not None:
            arg = arg.lower()
        clickables = self.clickables()
        if name == "search" and arg:
            try:
                self._search(arg.split(" "), 1)
            except ValueError as exc:       # WebShop raises here: the episode cannot go on
                self.done = True
                return StepResult(self.observation(), 0.0, True, False, {"error": str(exc)})
        elif name == "click" and arg in clickables and arg != "search":
            return self._click(arg)
        else:
            return StepResult(self.observation(), 0.0, False, False)
        return StepResult(self.observation(), 0.0, False, True)

    def _click(self, target: str) -> StepResult:
        if target == BUY:
            return self._buy()
        if target == BACK:
            self.page, self.keywords, self.asin, self.options, self.sub = "index", [], "", {}, None
        elif target == NEXT and self.page == "results":
            self._search(self.keywords, self.page_no + 1)
        elif target == PREV and self.page == "results":
            self._search(self.keywords, self.page_no - 1)
        elif target == PREV and self.page == "sub":
            self.page, self.sub = "item", None
        elif target == PREV and self.page == "item":
            self._search(self.keywords, self.page_no)
        elif target in SUB_PAGES:
            self.page, self.sub = "sub", target
        elif self.page == "results":
            self.asin, self.page = target.upper(), "item"
        else:
            self.options[self._option_groups()[target]] = target
        return StepResult(self.observation(), 0.0, False, True)

    def _buy(self) -> StepResult:
        p = self._item()
        product = {"name": p["name"], "query": p["query"], "product_category": p["product_category"],
                   "title": p["Title"], "attributes": p["Attributes"], "features": p["BulletPoints"],
                   "description": p["Description"]}
        value, parts = purchase_reward(product, self.goal, self.shop.prices[self.asin], self.options, verbose=True)
        self.reward, self.done, self.page = value, True, "done"
        return StepResult(self.observation(), value, True, True,
                          {"asin": self.asin, "options": dict(self.options), **parts})


SEARCH_ACTION = "search[<your query>]"     # how AutoRL-Bench lists the search bar among the actions
_SHOPS: dict[tuple, WebShopText] = {}


def shop_at(folder: str | Path, num_products: int | None = 1000, price_seed: int = 0) -> WebShopText:
    """One WebShopText per (data folder, size, price seed) per process: indexing is the expensive part."""
    key = (str(Path(folder).resolve()), num_products, price_seed)
    if key not in _SHOPS:
        _SHOPS[key] = WebShopText.from_folder(folder, num_products, price_seed)
    return _SHOPS[key]


def admissible(available: dict) -> list[str]:
    """The available actions as AutoRL-Bench lists them: the search bar, then `click[x]` per clickable."""
    return ([SEARCH_ACTION] if available["has_search_bar"] else []) + [f"click[{c}]" for c in available["clickables"]]


def is_valid(action: str, listed: list[str]) -> bool:
    """Whether WebShop acts on `action` on a page offering `listed` (admissible()): a non-empty
    search anywhere, a listed click other than `click[search]`."""
    name, arg = parse_action(action)
    if name == "search":
        return bool(arg)
    return name == "click" and arg is not None and f"click[{arg.lower()}]" in listed and arg.lower() != "search"


def session_reply(reply: str) -> str:
    """A model's reply as AutoRL-Bench's evaluator hands it to WebShop: its first line (generation stops
    at a newline), stripped, a leading `Action:` cut, `choose[` read as `click[`."""
    action = (reply or "").split("\n", 1)[0].strip()
    if action.startswith("Action:"):
        action = action[7:].strip()
    if action.startswith("choose["):
        action = "click[" + action[7:]
    return action


class SessionObservation(Observation):
    """A session step's outcome in the episode runner's terms (grading/episodes.py)."""


class SessionEpisode:
    """A WebShop session (AutoRL-Bench's `env.reset(session=i)`) as the episode runner plays it;
    won = a purchase with reward 1.0 (the grader applies its own `success_at`)."""

    def __init__(self, shop: WebShopText, session: int):
        self.env = shop.session(session)
        self.task = self.env.instruction
        self.task_type = self.env.goal["category"]

    def reset(self) -> SessionObservation:
        text = self.env.reset()
        return SessionObservation(text, admissible(self.env.available_actions()))

    def step(self, action: str) -> SessionObservation:
        r = self.env.step(action)
        return SessionObservation(r.observation, [] if r.done else admissible(self.env.available_actions()),
                                  won=r.done and r.reward >= 1.0 - 1e-9, reward=r.reward, done=r.done, valid=r.valid,
                                  info=r.info)

    def close(self) -> None:
        pass

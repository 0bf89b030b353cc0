"""The WebShop website in text mode: pages, actions, and the reward at `buy now`.

Pages (as in WebShop): the search page (a search box); results (10 per page out of the search's
top 50, `next >` / `< prev`); an item page (title, price, rating, option groups whose values are
clickable, `description`, `features`, `reviews`, `buy now`); the item's sub-pages. Actions are
`search[query]` (only where there is a search box) and `click[element]` (only an element shown on
the page, compared lower-cased). Anything else is invalid: the page stays as it was, reward 0.
Clicking `buy now` ends the episode with the purchase's reward (reward.py); won = reward 1.0.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .reward import reward as purchase_reward
from .search import SearchEngine

PER_PAGE = 10
BACK = "back to search"
NEXT = "next >"
PREV = "< prev"
BUY = "buy now"
SUB_PAGES = ("description", "features", "reviews")


@dataclass
class Observation:
    text: str
    admissible: list[str]
    won: bool = False
    moves: int = 0
    reward: float = 0.0
    done: bool = False
    valid: bool = True
    info: dict = field(default_factory=dict)


class Shop:
    """The products and their search engine, shared by every episode over one catalog."""

    def __init__(self, products: list[dict]):
        self.products = products
        self.by_asin = {p["asin"]: p for p in products}
        self.engine = SearchEngine(products)

    @classmethod
    def load(cls, path: str | Path) -> "Shop":
        with open(path) as fh:
            return cls([json.loads(line) for line in fh if line.strip()])


_CACHE: dict[str, Shop] = {}


def shop_for(path: str | Path) -> Shop:
    """One Shop per catalog file per process (indexing is the expensive part)."""
    key = str(Path(path).resolve())
    if key not in _CACHE:
        _CACHE[key] = Shop.load(key)
    return _CACHE[key]


_ACTION = re.compile(r"^(search|click)\[(.*)\]$", re.S)


def parse_action(text: str) -> tuple[str, str] | None:
    m = _ACTION.match((text or "").strip())
    if not m:
        return None
    return m.group(1), " ".join(m.group(2).split())


class ShopEpisode:
    """One instruction to fulfil: reset() then step(action) until done."""

    def __init__(self, shop: Shop, goal: dict):
        self.shop = shop
        self.goal = goal
        self.task = goal["instruction"]
        self.task_type = goal.get("category", "")

    # state: page in {search, results, item, sub}; query, results, page_no, asin, chosen, sub
    def reset(self) -> Observation:
        self.page, self.query, self.results, self.page_no = "search", "", [], 1
        self.asin, self.chosen, self.sub = None, {}, None
        self.moves, self.done = 0, False
        return self._observe()

    def close(self) -> None:
        pass

    def clickables(self) -> list[str]:
        if self.page == "search":
            return []
        if self.page == "results":
            out = [BACK]
            if self.page_no > 1:
                out.append(PREV)
            if self.page_no * PER_PAGE < len(self.results):
                out.append(NEXT)
            return out + [a.lower() for a in self._page_asins()]
        if self.page == "item":
            product = self.shop.by_asin[self.asin]
            values = [v.lower() for vals in product.get("options", {}).values() for v in vals]
            return [BACK, PREV] + values + list(SUB_PAGES) + [BUY]
        return [BACK, PREV]

    def admissible(self) -> list[str]:
        if self.page == "search":
            return ["search[...]"]
        return [f"click[{c}]" for c in self.clickables()]

    def step(self, action: str) -> Observation:
        if self.done:
            raise RuntimeError("the episode is over: call reset()")
        parsed = parse_action(action)
        self.moves += 1
        if parsed is None:
            return self._observe(valid=False)
        kind, arg = parsed
        if kind == "search":
            if self.page != "search" or not arg:
                return self._observe(valid=False)
            self.query, self.results = arg, self.shop.engine.search(arg)
            self.page, self.page_no = "results", 1
            return self._observe()
        target = arg.lower()
        if target not in self.clickables():
            return self._observe(valid=False)
        if target == BACK:
            self.page, self.asin, self.chosen, self.sub = "search", None, {}, None
        elif self.page == "results":
            if target == NEXT:
                self.page_no += 1
            elif target == PREV:
                self.page_no -= 1
            else:
                self.asin = next(a for a in self._page_asins() if a.lower() == target)
                self.page, self.chosen = "item", {}
        elif self.page == "item":
            if target == PREV:
                self.page, self.asin, self.chosen = "results", None, {}
            elif target in SUB_PAGES:
                self.page, self.sub = "sub", target
            elif target == BUY:
                return self._buy()
            else:
                for group, values in self.shop.by_asin[self.asin].get("options", {}).items():
                    match = next((v for v in values if v.lower() == target), None)
                    if match is not None:
                        self.chosen[group] = match
                        break
        else:  # a sub-page: < prev goes back to the item
            self.page, self.sub = "item", None
        return self._observe()

    def _buy(self) -> Observation:
        product = self.shop.by_asin[self.asin]
        value, parts = purchase_reward(product, self.goal, float(product["price"]), self.chosen, verbose=True)
        self.done = True
        text = f"Thank you for shopping with us! Your purchase reward is {value:.2f}."
        return Observation(text=text, admissible=[], won=value >= 1.0 - 1e-9, moves=self.moves, reward=value,
                           done=True, info={"asin": self.asin, "options": dict(self.chosen), **parts})

    def _page_asins(self) -> list[str]:
        start = (self.page_no - 1) * PER_PAGE
        return self.results[start:start + PER_PAGE]

    def _observe(self, valid: bool = True) -> Observation:
        return Observation(text=self.render(), admissible=self.admissible(), moves=self.moves, valid=valid)

    def render(self) -> str:
        lines = [f"Instruction: {self.task}"]
        if self.page == "search":
            lines.append("[Search]")
        elif self.page == "results":
            total = len(self.results)
            lines.append(f"[{_cap(BACK)}]")
            lines.append(f"Page {self.page_no} (Total results: {total})")
            nav = ([f"[{_cap(PREV)}]"] if self.page_no > 1 else []) + \
                  ([f"[{_cap(NEXT)}]"] if self.page_no * PER_PAGE < total else [])
            if nav:
                lines.append(" ".join(nav))
            for asin in self._page_asins():
                p = self.shop.by_asin[asin]
                lines.append(f"[{asin}] {p['title']} | ${p['price']:.2f}")
            if not total:
                lines.append("No products match your search.")
        elif self.page == "item":
            p = self.shop.by_asin[self.asin]
            lines.append(f"[{_cap(BACK)}] [{_cap(PREV)}]")
            for group, values in p.get("options", {}).items():
                shown = " ".join(f"[{v}]" for v in values)
                picked = f" (selected: {self.chosen[group]})" if group in self.chosen else ""
                lines.append(f"{group}: {shown}{picked}")
            lines.append(p["title"])
            lines.append(f"Price: ${p['price']:.2f}")
            lines.append(f"Rating: {p.get('rating', 'N.A.')}")
            lines.append("[Description] [Features] [Reviews] [Buy Now]")
        else:
            p = self.shop.by_asin[self.asin]
            lines.append(f"[{_cap(BACK)}] [{_cap(PREV)}]")
            if self.sub == "description":
                lines.append(p.get("description") or "No description.")
            elif self.sub == "features":
                lines.extend(p.get("features") or ["No features."])
            else:
                lines.append(p.get("reviews") or "No reviews yet.")
        return "\n".join(lines)


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:] if s[0].isalpha() else s[:2] + s[2:3].upper() + s[3:]

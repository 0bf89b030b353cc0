"""The expert: a policy that decides from what the page shows (so a model can imitate it).

Search with the instruction's key terms; on the results, open the listed product whose title
shares the most words with the instruction among those under the price bound; on the item page,
click each option group's value named in the instruction, then buy. Standard library only.
"""

from __future__ import annotations

import re

from .react_prompt import SYSTEM_PROMPT as REACT_SYSTEM_PROMPT
from .react_prompt import read_prompt as read_react_prompt

_PRICE = re.compile(r",?\s*and price lower than ([0-9]+(?:\.[0-9]+)?) dollars")
_FILLER = {"i", "need", "am", "looking", "for", "find", "me", "want", "to", "buy", "i'm", "searching", "a",
           "an", "with", "and", "in", "the"}
_LABELS = {"color", "size", "flavor", "scent", "roast", "model", "length", "of"}   # option labels
_ITEM = re.compile(r"^\[(B0[A-Z0-9]{2,8})\] (.*) \| \$([0-9.]+)$", re.I)   # ids as the prompt shows them: lower-case


def split_instruction(instruction: str) -> tuple[str, float | None]:
    m = _PRICE.search(instruction)
    bound = float(m.group(1)) if m else None
    return _PRICE.sub("", instruction).strip(), bound


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+(?:\.[0-9]+)?", text.lower())


def search_query(instruction: str) -> str:
    text, _ = split_instruction(instruction)
    text = text.replace(":", " ").replace(",", " ")
    return " ".join(w for w in _words(text) if w not in _FILLER)


def _mentions(text: str, value: str) -> bool:
    return re.search(r"(?<![\w.-])" + re.escape(value.lower()) + r"(?![\w.-])", text.lower()) is not None


def expert_action(page: str, admissible: list[str], history: list[str] = ()) -> str:
    """The expert's next action on a page rendered by shop.ShopEpisode; `history` is the previous
    actions the prompt shows (products opened there are not opened again)."""
    if " [SEP] " in page:
        return session_action(page, admissible, history)
    lines = page.splitlines()
    instruction = lines[0].removeprefix("Instruction: ")
    wanted, bound = split_instruction(instruction)
    if admissible == ["search[...]"]:
        return f"search[{search_query(instruction)}]"
    if "click[buy now]" in admissible:          # the item page
        clicks = []
        for line in lines[1:]:
            m = re.match(r"^([a-z][a-z ]*): ((?:\[[^\]]+\] ?)+)(?: \(selected: (.*)\))?$", line)
            if not m:
                continue
            values = re.findall(r"\[([^\]]+)\]", m.group(2))
            named = sorted((v for v in values if _mentions(wanted, v)), key=len, reverse=True)
            if not named and _mentions(wanted, m.group(1)):
                return "click[< prev]"      # the instruction names a value this product lacks
            if named and m.group(3) != named[0]:
                clicks.append(f"click[{named[0].lower()}]")
        return clicks[0] if clicks else "click[buy now]"
    if any(a.startswith("click[b0") for a in admissible):   # results
        listed = [(m.group(1), m.group(2), float(m.group(3))) for m in map(_ITEM.match, lines) if m]
        best = _best_listed(listed, set(_words(wanted)) - _FILLER - _LABELS, bound, history)
        if best is not None:
            return f"click[{best.lower()}]"
        if "click[next >]" in admissible:
            return "click[next >]"
        return "click[back to search]"
    return "click[< prev]"


def _best_listed(listed: list[tuple[str, str, float]], want: set[str], bound: float | None,
                 history) -> str | None:
    """The listed (asin, title, price) whose title shares most of `want`, under the bound, not opened before."""
    best, best_score = None, -1
    for asin, title, price in listed:
        if (bound is not None and price > bound) or f"click[{asin.lower()}]" in history:
            continue
        score = len(want & set(_words(title)))
        if score > best_score:
            best, best_score = asin, score
    return best


def _synthetic_goal(instruction: str) -> tuple[str, list[str], float | None]:
    """(what, option values, price bound) of a WebShop synthetic instruction
    (`<what> with <name>: <value>, and <name>: <value>, and price lower than B dollars`)."""
    text, bound = split_instruction(instruction)
    what, _, opts = text.partition(" with ")
    values = [o.split(": ", 1)[1] for o in opts.split(", and ") if ": " in o] if opts else []
    return what, values, bound


def session_action(page: str, admissible: list[str], history: list[str] = ()) -> str:
    """The expert on a WebShop session page (`[SEP]`-joined, webagent.py): search for the instruction's
    product, open the listed one whose title shares most words with it under the price bound, click
    the option values it names, buy."""
    segs = page.split(" [SEP] ")
    instruction = segs[segs.index("Instruction:") + 1] if "Instruction:" in segs else ""
    what, values, bound = _synthetic_goal(instruction)
    if "search[<your query>]" in admissible:
        return f"search[{what}]"
    if "click[buy now]" in admissible:
        for v in values:
            if f"click[{v}]" in admissible and f"click[{v}]" not in history:
                return f"click[{v}]"
        return "click[buy now]"
    if "Next >" in segs:
        listed = segs[segs.index("Next >") + 1:]
        triples = [(listed[k], listed[k + 1], float((re.findall(r"[0-9.]+", listed[k + 2]) or ["0"])[0]))
                   for k in range(0, len(listed) - 2, 3)]
        best = _best_listed(triples, set(_words(what)) - _FILLER, bound, history)
        if best is not None:
            return f"click[{best.lower()}]"
        return "click[next >]" if listed else "click[back to search]"
    return "click[< prev]"


def read_prompt(user_message: str) -> tuple[str, list[str], list[str]]:
    """(page, previous actions, available actions) from a user message built by prompts.py."""
    page, history, admissible = "", [], []
    for part in user_message.split("\n\n"):
        if part.startswith("Previous actions: "):
            history = part[len("Previous actions: "):].split(" ; ")
        elif part.startswith(("Instruction: ", "WebShop [SEP] ", "Thank you for shopping")):
            page = part
        elif part.startswith("Available actions: "):
            admissible = part[len("Available actions: "):].split(", ")
    return page, history, admissible


def expert_generate(prompts: list[list[dict]]) -> list[str]:
    """The expert as a `generate` function for api.run_episodes: it reads only the prompt."""
    replies = []
    for messages in prompts:
        reader = read_react_prompt if messages[0]["content"] == REACT_SYSTEM_PROMPT else read_prompt
        page, history, admissible = reader(messages[-1]["content"])
        replies.append(expert_action(page, admissible, history))
    return replies

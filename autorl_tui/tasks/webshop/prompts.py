"""The prompt the policy sees each turn, and how its reply becomes an action. Standard library only.

A turn is a chat: a system message with the rules, and a user message with the last few actions,
the current page (which repeats the instruction) and the actions available on it.
"""

from __future__ import annotations

import re

# Kept short on purpose: it is in every turn's prompt, and a small model pays for its tokens at
# every training and grading step (the first version was 155 tokens of tiny-webshop's 490).
SYSTEM_PROMPT = ("Shop for the customer: search, open the product that fits the instruction, click the options "
                 "it names, then click[buy now]. Reply with one action: search[query] or click[element].")
INVALID_FEEDBACK = "Invalid action: nothing happens."
_ACTION = re.compile(r"(search|click)\s*\[([^\]\n]*)\]", re.I)


_LISTED_ID = re.compile(r"^\[(B0[A-Z0-9]{2,8})\]", re.M)


def condensed(page: str) -> str:
    """The page as the prompt shows it: a results listing's product ids lower-case, as its click
    actions write them, so the id to copy is the same tokens in the listing, the actions and the
    reply (the shop compares clicks lower-cased either way)."""
    return _LISTED_ID.sub(lambda m: f"[{m.group(1).lower()}]", page)


def user_message(page: str, history: list[str], admissible: list[str], history_len: int = 8) -> str:
    parts = []
    shown = history[-history_len:] if history_len > 0 else []
    if shown:
        parts.append("Previous actions: " + " ; ".join(shown))
    parts.append(condensed(page).strip())
    parts.append("Available actions: " + ", ".join(admissible))
    parts.append("Your next action:")
    return "\n\n".join(parts)


def build_messages(page: str, history: list[str], admissible: list[str], history_len: int = 8) -> list[dict]:
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": user_message(page, history, admissible, history_len)}]


def messages_to_text(messages: list[dict]) -> str:
    """Plain-text rendering for models without a chat template (prompt_format: plain)."""
    return "\n\n".join(m["content"] for m in messages) + "\n> "


def parse_reply(text: str) -> str | None:
    """The first `search[...]` or `click[...]` in the reply, normalized; None when there is none."""
    m = _ACTION.search(text or "")
    if not m:
        return None
    kind, arg = m.group(1).lower(), " ".join(m.group(2).split())
    return f"{kind}[{arg.lower() if kind == 'click' else arg}]"

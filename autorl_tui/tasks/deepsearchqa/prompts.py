"""The tool-loop prompt and the reply -> action parser (standard library only; copied into the
agent's workspace so training code builds exactly the prompts the grader sends).

A turn's prompt is a chat: a system message with the rules and a user message with the question,
the last `history_len` actions and what they returned, and the step count. The reply holds one
action, optionally after a `think: ...` line: `search[query]`, `open[doc_id]` (`open[doc_id#2]`
for the article's second page) or `answer[text]` (several answers separated by `;`).
"""

from __future__ import annotations

import re

SYSTEM_PROMPT = (
    "You answer questions by searching an encyclopedia. Each turn, reply with exactly one action:\n"
    "search[query] - find articles; you get titles, document ids and snippets\n"
    "open[doc_id] - read an article (open[doc_id#2] for its next page)\n"
    "answer[text] - give the final answer and stop (several answers: separate them with ;)\n"
    "Questions need several lookups. You may write one line `think: ...` before the action."
)
INVALID_FEEDBACK = "Invalid action. Reply with search[query], open[doc_id] or answer[text]."
THOUGHT_FEEDBACK = "OK."
_FIRST_ACTION = re.compile(r"\b(search|open|answer)\s*\[(.*?)\]", re.I | re.S)
_THINK = re.compile(r"^\s*think\s*:\s*(.*)$", re.I | re.M)


def parse_reply(reply: str) -> tuple[str | None, tuple[str, str] | None]:
    """(thought, (tool, argument)) of a reply; the first well-formed action counts."""
    reply = reply or ""
    think = _THINK.search(reply)
    thought = think.group(1).strip() if think else None
    m = _FIRST_ACTION.search(reply)
    if not m:
        return thought, None
    arg = " ".join(m.group(2).split())
    return thought, (m.group(1).lower(), arg)


def format_action(tool: str, arg: str) -> str:
    return f"{tool}[{arg}]"


def build_messages(question: str, history: list[tuple[str, str]], *, step: int, max_steps: int,
                   history_len: int = 4) -> list[dict]:
    """history: (action, what it returned) for every step so far; the last `history_len` shown."""
    parts = [f"Question: {question}"]
    shown = history[-history_len:] if history_len > 0 else []
    hidden = len(history) - len(shown)
    if hidden:
        parts.append(f"({hidden} earlier step(s) not shown)")
    for action, result in shown:
        parts.append(f"> {action}\n{result}")
    parts.append(f"Step {step} of {max_steps}. Your action:")
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n\n".join(parts)}]


def messages_to_text(messages: list[dict]) -> str:
    """A chat as plain text (for `prompt_format: plain`)."""
    return "\n\n".join(m["content"] for m in messages) + "\n"

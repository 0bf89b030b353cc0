"""AutoRL-Bench's WebShop prompt (rdagent/scenarios/rl/autorl_bench/benchmarks/webshop/eval.py:
`build_react_prompt`, `_format_available_actions` and its chat system message), for the sessions of
webagent.py. Standard library only. The texts below must be the evaluator's, character for
character, for the same model to see the same prompt; checked against the evaluator's own functions
run on the reference episodes (tests/unit/test_webshop_text_env.py).

The user message: the rules, `Instruction: ` followed by the page's instruction heading (which
itself starts `Instruction: `), the available actions one per line (`  search[<your query>]`,
`  click[x]`), then the last `window` (5) steps as `Observation k: <the page after action k>` /
`Action k: <action k>` (the evaluator pairs each action with the page it led to), and the current
page as `Observation n:` and `Action n:` to complete. One chat turn with the system message below;
the reply is read up to its first newline (webagent.session_reply).
"""

from __future__ import annotations

SYSTEM_PROMPT = ("You are a helpful shopping assistant browsing an e-commerce website. "
                 "Given a user instruction, current observation, and available actions, "
                 "pick the best action to find and purchase a matching product. "
                 "Output ONLY one action (e.g., 'search[red shoes]', 'click[buy now]') "
                 "with NO extra text, NO explanation.")
WINDOW = 5
_HEAD = ("You are shopping on an e-commerce website. Find and purchase a product matching the user's "
         "instruction.\n\nInstruction: {instruction}\n\nAvailable actions:\n{actions}\n\nRules:\n"
         "- Output ONLY one action from the available actions list above.\n"
         "- For search, use: search[your query]\n"
         "- For clicking, use: click[exact text from the list]\n"
         "- Do NOT output anything other than the action.\n\nNow it's your turn:\n")


def user_message(instruction: str, history: list[tuple[str, str]], observation: str, admissible: list[str],
                 window: int = WINDOW) -> str:
    """`instruction`: the page's heading (`Instruction: ...`); `history`: (action, page after it) pairs."""
    prompt = _HEAD.format(instruction=instruction, actions="\n".join(f"  {a}" for a in admissible))
    recent = history[-window:] if len(history) > window else history
    offset = len(history) - len(recent)
    for i, (action, seen) in enumerate(recent):
        prompt += f"\nObservation {offset + i + 1}: {seen}\nAction {offset + i + 1}: {action}\n"
    return prompt + f"\nObservation {len(history) + 1}: {observation}\nAction {len(history) + 1}:"


def build_messages(instruction: str, history: list[tuple[str, str]], observation: str, admissible: list[str],
                   window: int = WINDOW) -> list[dict]:
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": user_message(instruction, history, observation, admissible, window)}]


def read_prompt(message: str) -> tuple[str, list[str], list[str]]:
    """(current page, actions shown, available actions) from a user message built here (for the expert)."""
    head, _, steps = message.partition("\n\nNow it's your turn:\n")
    block = head.split("\nAvailable actions:\n", 1)[1].split("\n\nRules:\n", 1)[0] if "\nAvailable actions:\n" in head else ""
    admissible = [line[2:] for line in block.split("\n") if line.startswith("  ")]
    history, page = [], ""
    for line in steps.split("\n"):
        if line.startswith("Action ") and ": " in line:
            history.append(line.split(": ", 1)[1])
        elif line.startswith("Observation ") and ": " in line:
            page = line.split(": ", 1)[1]
    return page, history, admissible

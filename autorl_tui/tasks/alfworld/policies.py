"""Reference policies that need no model, implementing the grader's Policy protocol.

- ReplayExpertPolicy: answers each prompt with the planner's next command for that game (finds
  the game by the room-and-task text at the top of the prompt, the step by the history shown).
  Scores 100% when the scorer's loop, prompts and matching are right.
- FixedCommandPolicy: always says the same thing (e.g. "look"); scores ~0%.
Used by tests and the benchmark; also handy to check a new environment set-up.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from autorl_tui.grading.types import Completion

_HIDDEN = re.compile(r"^\((\d+) earlier step\(s\) not shown\)$", re.M)


def _user_text(prompt) -> str:
    if isinstance(prompt, str):
        return prompt
    return next(m["content"] for m in prompt if m["role"] == "user")


class ReplayExpertPolicy:
    def __init__(self, split_dir: Path, games: list[dict]):
        self.plans: dict[str, list[str]] = {}
        for g in games:
            gamefile = Path(g["gamefile"])
            expert = json.loads((gamefile if gamefile.is_absolute() else split_dir / gamefile)
                                .with_name("expert.json").read_text())
            self.plans[expert["intro"].strip()] = [s["action"] for s in expert["steps"]]
        self.calls = 0

    def _step(self, text: str) -> tuple[str, int]:
        intro = text.split("\n\n> ", 1)[0].split("\n\n(", 1)[0].split("\n\nAvailable commands:", 1)[0].strip()
        hidden = _HIDDEN.search(text)
        shown = sum(1 for block in text.split("\n\n") if block.startswith("> "))
        return intro, shown + (int(hidden.group(1)) if hidden else 0)

    def generate(self, prompts, *, n=1, temperature=0.0, top_p=1.0, max_tokens=64, stop=None):
        self.calls += 1
        out = []
        for p in prompts:
            intro, step = self._step(_user_text(p))
            plan = self.plans.get(intro, [])
            text = plan[step] if step < len(plan) else "look"
            out.append([Completion(text=text, tokens=len(text.split()), finish_reason="stop")] * n)
        return out


class FixedCommandPolicy:
    def __init__(self, text: str = "look"):
        self.text = text
        self.calls = 0

    def generate(self, prompts, *, n=1, temperature=0.0, top_p=1.0, max_tokens=64, stop=None):
        self.calls += 1
        return [[Completion(text=self.text, tokens=1, finish_reason="stop")] * n for _ in prompts]

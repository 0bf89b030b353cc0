"""The task's InteractiveEnvironment (`scorer_options.env: environment:NumberWalk`): the generic
runner (autorl_tui.grading.episodes) with this task's prompt and reply hooks."""

import json
from pathlib import Path

from autorl_tui.grading.episodes import Parsed, run_episodes

from .walk import Walk

RULES = "Walk to the target number. Reply with one command: up or down."


def build_prompt(state):
    steps = "".join(f"\n> {action}\n{feedback}" for action, feedback in state.history)
    return [{"role": "system", "content": RULES},
            {"role": "user", "content": f"{state.intro}{steps}\nYour command:"}]


def parse_reply(reply, obs):
    text = (reply or "").strip().lower().rstrip(".")
    word = text.split()[0] if text else None
    return Parsed(action=word if word in obs.admissible else None, exact=text in obs.admissible, text=text or None)


class NumberWalk:
    name = "number-walk"
    options = frozenset()

    def validate_options(self, opts):
        return []

    def episodes(self, items, split_path):
        if items:
            return items
        return [json.loads(line) for line in (Path(split_path) / "items.jsonl").read_text().splitlines()]

    def open(self, episode):
        return Walk(episode)

    def run_episodes(self, generate, episodes, *, max_steps, batch_size, options, log, on_progress=None):
        return run_episodes(generate, episodes, open_episode=Walk, build_prompt=build_prompt,
                            parse_reply=parse_reply, max_steps=max_steps, batch_size=batch_size, log=log,
                            on_progress=on_progress)

    def to_text(self, messages):
        return "\n\n".join(m["content"] for m in messages)

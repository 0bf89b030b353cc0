"""`autorl-tui score TASK --episodes FILE`: replay given action lists in an interactive task's
environment, under the chosen protocol, and score them as the grader does.

FILE has one JSON object per line, `{"id": ITEM_ID, "actions": [ACTION, ...]}`. Each episode is
played by the task's own scorer (`env_success` or `deepsearchqa`) with a policy whose replies are
the actions in order, one per step; an episode ends at its win or answer, or at the protocol's
step limit (actions left over are not played; when they run out first, the remaining steps get
empty replies). Where the environment says how a model writes an action under the protocol
(`replay_reply`), an action is written so: under DeepSearchQA's `autorl-bench` loop a bare
`search[q]` or `answer[x]` is replied as `Action: search[q]`, and any other line is a whole model
turn, as written (a turn without an action takes the next line, as written, as its forced
answer). Per item: won, reward, correct (the answer's verdict for DeepSearchQA, else won),
steps; the aggregate: success rate, mean reward, the share with reward >= 0.5 (AutoRL-Bench's
WebShop score), and DeepSearchQA's accuracy and answer categories.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from autorl_tui.commands._jsonl import read_rows
from autorl_tui.exitcodes import UsageError

EPISODE_SCORERS = ("env_success", "deepsearchqa")


def read_episodes(path: Path) -> list[tuple[str, list[str]]]:
    rows = read_rows(path, "--episodes", '{"id": ..., "actions": [...]}', '"id" and "actions" (a list of strings)',
                     lambda row: isinstance(row.get("actions"), list) and all(isinstance(a, str) for a in row["actions"]))
    return [(str(row["id"]), list(row["actions"])) for row in rows]


class ReplayActions:
    """A grading.types.Policy replying with the next action of one episode at each step."""

    def __init__(self, actions: list[str], render=None):
        self.actions = list(actions)
        self.render = render or (lambda action, stop: action)

    def generate(self, prompts, *, n=1, stop=None, **_):
        from autorl_tui.grading.types import Completion
        out = []
        for _prompt in prompts:
            text = self.render(self.actions.pop(0), stop) if self.actions else ""
            out.append([Completion(text, len(text.split()), "stop")])
        return out


def item_result(sample) -> dict:
    data = sample.data or {}
    answer = data.get("answer_score") or {}
    return {"id": sample.sample_id, "won": bool(data.get("won")), "reward": float(data.get("reward") or 0.0),
            "correct": bool(answer.get("correct")) if answer else bool(data.get("won")),
            "steps": int(data.get("steps") or 0), "category": answer.get("category"),
            "answer_scoring": answer.get("method"), "error": sample.error}


def aggregate(items: list[dict]) -> dict:
    n = len(items) or 1
    out = {"episodes": len(items), "success_rate": 100.0 * sum(i["won"] for i in items) / n,
           "accuracy": 100.0 * sum(i["correct"] for i in items) / n,
           "mean_reward": 100.0 * sum(i["reward"] for i in items) / n,
           "reward_ge_0.5": 100.0 * sum(i["reward"] >= 0.5 for i in items) / n,
           "mean_steps": sum(i["steps"] for i in items) / n}
    categories = [i["category"] for i in items if i["category"]]
    if categories:
        for cat in sorted(set(categories)):
            out[f"share_{cat}"] = 100.0 * categories.count(cat) / n
    return out


def replay_render(scorer, ctx):
    """The environment's `replay_reply(action, options, stop)` (what a model writes to take an action
    under the protocol, e.g. DeepSearchQA's `Action: search[q]` in AutoRL-Bench's loop), if it has one."""
    from autorl_tui.grading.scorers.env_success import load_environment
    options = scorer.options_for(ctx.options)
    hook = getattr(load_environment(str(options.get("env", "alfworld")), ctx.task_dir), "replay_reply", None)
    return None if hook is None else (lambda action, stop: hook(action, options, stop))


def replay(card, split: str, split_path: Path, rows: list[tuple[str, list[str]]], scratch: Path, log) -> list[dict]:
    """Each row's episode played by the card's scorer under the card's (chosen) protocol."""
    from autorl_tui.catalog.tasks import read_items
    from autorl_tui.grading.scorers import get_scorer
    from autorl_tui.grading.types import ScorerContext

    if card.scorer not in EPISODE_SCORERS:
        raise UsageError(f"task {card.id} uses the {card.scorer} scorer, which has no episodes: "
                         "use --completions FILE")
    index = split_path / "items.jsonl" if Path(split_path).is_dir() else split_path
    by_id = {str(item.get("id")): item for item in read_items(index)}
    unknown = [i for i, _ in rows if i not in by_id]
    if unknown:
        some = ", ".join(list(by_id)[:3])
        raise UsageError(f"unknown id {unknown[0]!r}: not an episode of {card.id}'s {split} split "
                         f"({len(by_id)} episodes, e.g. {some}); pick the split with --split")
    protocol = dataclasses.replace(card.protocol, n=1, k=[1], batch_size=1)
    scorer = get_scorer(card.scorer, card.dir)
    ctx = ScorerContext(task_dir=card.dir, split=split, split_path=split_path, scratch_dir=scratch,
                        options=dict(card.scorer_options or {}), log=log)
    render = replay_render(scorer, ctx)
    results = []
    for item_id, actions in rows:
        result = scorer.evaluate(ReplayActions(actions, render), [by_id[item_id]], protocol, ctx)
        results.append(item_result(result.samples[0]))
    return results

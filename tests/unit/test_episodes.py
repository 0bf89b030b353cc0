"""The generic batched episode runner (grading/episodes.py) over a small real environment: a
counter to bring to a target with `add N`, whose `stop` ends the episode with a partial reward."""

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

from autorl_tui.grading import episodes
from autorl_tui.grading.episodes import Parsed, run_episodes


@dataclass
class Obs:
    text: str
    admissible: list
    won: bool = False
    reward: float = 0.0
    done: bool = False


class Counter:
    """Reach `target` from 0 with `add 1`/`add 2`; `stop` gives up with reward value/target."""

    def __init__(self, item):
        if item.get("broken"):
            raise FileNotFoundError(f"no such episode {item['id']}")
        self.target, self.task_type = item["target"], item.get("kind", "count")
        self.closed = False

    def reset(self):
        self.value = 0
        self.task = f"reach {self.target}"
        return Obs(f"You are at 0. Your task is to: {self.task}", ["add 1", "add 2", "stop"])

    def step(self, action):
        if action == "explode":
            raise RuntimeError("boom")
        if action == "stop":
            return Obs("You stop.", [], reward=self.value / self.target, done=True)
        self.value += int(action.split()[1])
        won = self.value == self.target
        return Obs(f"You are at {self.value}.", ["add 1", "add 2", "stop"], won=won, reward=float(won), done=won)

    def close(self):
        self.closed = True


def prompt(state):
    lines = [state.intro] + [f"> {a}\n{f}" for a, f in state.history] + ["Commands: " + ", ".join(state.obs.admissible)]
    return [{"role": "system", "content": "play"}, {"role": "user", "content": "\n".join(lines)}]


def parse(reply, obs):
    thought = reply[len("think:"):].strip() if reply.startswith("think:") else None
    text = None if thought is not None else reply.strip()
    if text in obs.admissible or text == "explode":
        return Parsed(text, exact=True, text=text)
    if text and text.lower().rstrip(".") in obs.admissible:
        return Parsed(text.lower().rstrip("."), exact=False, text=text)
    return Parsed(None, exact=False, thought=thought, text=text)


def play(items, script, **kw):
    """script(goal, turn) -> reply; returns (records, the batch sizes generate saw, opened episodes)."""
    turns, batches, opened = {}, [], []

    def generate(prompts):
        batches.append(len(prompts))
        out = []
        for p in prompts:
            goal = p[-1]["content"].split("Your task is to: ")[1].split("\n")[0]
            turns[goal] = turns.get(goal, 0) + 1
            out.append(script(goal, turns[goal]))
        return out

    def open_episode(item):
        ep = Counter(item)
        opened.append(ep)
        return ep

    return run_episodes(generate, items, open_episode=open_episode, build_prompt=prompt, parse_reply=parse, **kw), \
        batches, opened


def test_every_live_episode_advances_one_step_per_generate_call_and_records_come_back_in_order():
    items = [{"id": f"e{t}", "target": t} for t in (4, 2, 6, 3, 1)]
    progress, logs = [], []
    records, batches, opened = play(items, lambda goal, turn: "add 1", batch_size=2, max_steps=10,
                                    log=logs.append, on_progress=lambda d, t: progress.append((d, t)))
    assert [r.game_id for r in records] == [i["id"] for i in items]
    assert [r.steps for r in records] == [4, 2, 6, 3, 1] and all(r.won and r.reward == 1.0 for r in records)
    assert max(batches) == 2 and sum(batches) == 16          # 16 steps in all, never more than 2 live
    assert progress[-1] == (5, 5) and [d for d, _ in progress] == sorted(d for d, _ in progress)
    assert all(ep.closed for ep in opened) and len(logs) == 5 and logs[0] == "episode e2: won in 2 steps"
    step = records[1].trajectory[1]
    assert step["step"] == 2 and step["observation"] == "You are at 1." and step["action"] == "add 1"
    assert step["feedback"] == "You are at 2." and step["won"] is True
    assert "> add 1\nYou are at 1." in step["prompt"]          # the last message, history included


def test_step_accounting_thoughts_invalid_unmatched_tokens_and_max_steps():
    class Reply:
        def __init__(self, text, tokens):
            self.text, self.tokens = text, tokens

    replies = ["think: count up", "Add 1.", "dance", Reply("add 1", 7), "add 1"]
    [r], _, _ = play([{"id": "a", "target": 9, "kind": "nine"}], lambda goal, turn: replies[(turn - 1) % 5],
                     max_steps=7)
    assert (r.steps, r.won, r.error) == (7, False, None)
    assert (r.thought_steps, r.invalid_steps, r.unmatched_steps, r.tokens) == (2, 3, 1, 7)
    assert r.task == "reach 9" and r.task_type == "nine"
    t = r.trajectory
    assert (t[0]["thought"], t[0]["feedback"]) == ("count up", episodes.THOUGHT_FEEDBACK)
    assert (t[1]["action"], t[1]["exact"], t[1]["command_text"]) == ("add 1", False, "Add 1.")
    assert (t[2]["action"], t[2]["feedback"]) == (None, episodes.INVALID_FEEDBACK)
    assert "> think: count up\nOK." in t[3]["prompt"] and "> dance\nNothing happens." in t[3]["prompt"]
    assert t[6]["observation"] == "You are at 3."


def test_done_without_a_win_ends_the_episode_with_its_reward():
    [r], _, _ = play([{"id": "s", "target": 4}], lambda goal, turn: "add 1" if turn < 3 else "stop")
    assert (r.won, r.steps, r.reward, r.error) == (False, 3, 0.5, None)


def test_an_unloadable_episode_and_a_failing_step_are_failed_records_not_a_crashed_run():
    items = [{"id": "bad", "broken": True, "gamefile": "x.json", "task_type": "k"}, {"id": "x", "target": 3},
             {"id": "ok", "target": 1}]
    records, _, opened = play(items, lambda goal, turn: "explode" if goal == "reach 3" else "add 1")
    bad, boom, ok = records
    assert bad.error == "FileNotFoundError: no such episode bad" and (bad.steps, bad.gamefile) == (0, "x.json")
    assert boom.error == "RuntimeError: boom" and boom.steps == 1 and not boom.won
    assert ok.won and ok.error is None and all(ep.closed for ep in opened)


def test_the_runner_imports_only_the_standard_library():
    """It is copied into agents' workspaces beside a task's hooks, where the harness is absent."""
    tree = ast.parse(Path(episodes.__file__).read_text())
    modules = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0}
    assert modules and modules <= set(sys.stdlib_module_names) | {"__future__"}


def test_a_reply_whose_prompt_outgrew_the_context_ends_the_episode_with_the_reason():
    """The backend refuses a prompt with no room left (grading/context_budget.py): that episode
    ends failed, the reason its error and the step marked, its failure kind prompt_too_long."""
    from autorl_tui.grading.scorers.env_success import to_sample
    from autorl_tui.grading.types import Completion

    why = "the prompt has 300 tokens and the model's context holds 256: no room for a single new token"
    refused = Completion("", 0, "prompt_too_long", error=why, budget=0, prompt_tokens=300)
    records, _, opened = play([{"id": "long", "target": 9}, {"id": "ok", "target": 2}],
                              lambda goal, turn: refused if (goal, turn) == ("reach 9", 3) else "add 1")
    long, ok = records
    assert (long.won, long.steps, long.error) == (False, 3, why) and long.trajectory[-1]["refused"] == why
    assert ok.won and ok.error is None and all(ep.closed for ep in opened)
    sample = to_sample(long, {})
    assert (sample.failure_kind, sample.error, sample.score) == ("prompt_too_long", why, 0.0)

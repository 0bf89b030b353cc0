"""ALFWorld under AutoRL-Bench's protocol (tasks/alfworld/react.py) agrees with alfworld's own
environment: free-text episodes replayed through our runner win exactly when alfworld's
`AlfredTWEnv` (configured as AutoRL-Bench's base_config.yaml: handcoded expert type, dagger,
50 steps per episode, eval_out_of_distribution) says so, after the same number of steps, and the
text our runner would complete is the prompt AutoRL-Bench builds from alfworld's observations.

The prompt file is one the test writes in the format of AutoRL-Bench's react_prompts.json (the
real file is never copied into the project). Games: generated in alfworld's on-disk format."""

import json
import os
from pathlib import Path

import pytest

from autorl_tui.grading.scorers import get_scorer
from autorl_tui.grading.types import EvalProtocol, ScorerContext

PROTOCOL = EvalProtocol(temperature=0.0, top_p=1.0, max_tokens=100, max_steps=50, prompt_format="plain",
                        batch_size=1, stop=["\n"])

TYPES = ("pick_and_place_simple", "look_at_obj_in_light")
KEYS = ("put", "clean", "heat", "cool", "examine", "puttwo")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    os.environ.setdefault("ALFWORLD_DATA", str(tmp_path_factory.mktemp("alfworld_data")))
    from autorl_tui.tasks.alfworld.games import build_games
    root = tmp_path_factory.mktemp("alfworld_autorl")
    items = build_games(root / "valid_unseen", seed=5, n_per_type=1, task_types=TYPES)
    for it in items:
        it["gamefile"] = str((root / "valid_unseen" / it["gamefile"]).resolve())
    prompts = {f"react_{k}_{i}": f"You are in the middle of a room ({k} example {i}).\n> think: plan {k}\nOK.\n"
               for k in KEYS for i in (0, 1)}
    (root / "react_prompts.json").write_text(json.dumps(prompts))
    return root, items, prompts


PREFIXES = (("pick_and_place", "put"), ("pick_clean_then_place", "clean"), ("pick_heat_then_place", "heat"),
            ("pick_cool_then_place", "cool"), ("look_at_obj", "examine"), ("pick_two_obj", "puttwo"))


def reference(root: Path, gamefile: str, actions: list[str], prompts: dict, games: Path | None = None) -> dict:
    """alfworld's own environment driven as AutoRL-Bench's evaluator drives it (the games of
    `games`, default root/valid_unseen)."""
    from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv
    config = {"dataset": {"eval_ood_data_path": str(games or root / "valid_unseen"), "num_eval_games": -1},
              "env": {"type": "AlfredTWEnv", "domain_randomization": False, "task_types": [1, 2, 3, 4, 5, 6],
                      "expert_type": "handcoded", "goal_desc_human_anns_prob": 0.0},
              "general": {"training_method": "dagger"}, "dagger": {"training": {"max_nb_steps_per_episode": 50}}}
    tw = AlfredTWEnv(config, train_eval="eval_out_of_distribution")
    env = tw.init_env(batch_size=1)
    try:
        for _ in range(tw.num_games):
            ob, info = env.reset()
            if os.path.samefile(info["extra.gamefile"][0], gamefile):
                break
        else:
            raise AssertionError(f"{gamefile} not among alfworld's games")
        ob = "\n".join(ob[0].split("\n\n")[1:])
        name = "/".join(info["extra.gamefile"][0].split("/")[-3:-1])
        key = next(k for p, k in PREFIXES if name.startswith(p))
        text = ("Interact with a household to solve a task. Here are two examples.\n" + prompts[f"react_{key}_1"]
                + prompts[f"react_{key}_0"] + "\nHere is the task.\n" + ob + "\n>")
        history = ""
        for i, action in enumerate(actions[:50], 1):
            obs, _, done, info = env.step([action])
            obs = obs[0]
            if obs.startswith("You arrive at loc "):
                obs = obs[obs.find(". ") + 2:]
            if action.startswith("think:"):
                obs = "OK."
            last_prompt = text + history
            history += f" {action}\n{obs}\n>"
            if done[0]:
                return {"won": bool(info["won"][0]), "steps": i, "last_prompt": last_prompt}
        return {"won": False, "steps": min(len(actions), 50), "last_prompt": text + history}
    finally:
        env.close()


class Replay:
    """A policy replaying a fixed list of free-text actions (one episode per evaluation)."""

    def __init__(self, actions):
        self.actions = list(actions)
        self.prompts = []

    def generate(self, prompts, *, n=1, stop=None, max_tokens=None, **kw):
        assert stop == ["\n"] and max_tokens == 100
        out = []
        for p in prompts:
            self.prompts.append(p)
            out.append([self.actions.pop(0) + "\nextra text past the stop" if self.actions else "look"])
        return out


def context(root: Path, prompts_file: Path) -> ScorerContext:
    return ScorerContext(task_dir=None, split="test", split_path=root, scratch_dir=root, log=lambda s: None,
                         options={"env": "alfworld", "react": "autorl-bench", "react_prompts": str(prompts_file)})


def ours(root: Path, item: dict, actions: list[str]) -> tuple:
    policy = Replay(actions)
    result = get_scorer("env_success").evaluate(policy, [item], PROTOCOL, context(root, root / "react_prompts.json"))
    return result.samples[0], policy.prompts


def episodes(items):
    put, look = items
    walk_put, walk_look = put["expert_actions"], look["expert_actions"]
    return [
        ("walkthrough", put, walk_put),
        ("invalid commands and a thought on the way", put,
         ["go to the moon", "think: where is it?", "take everything"] + walk_put[:2] + ["dance"] + walk_put[2:]),
        ("only invalid commands", look, ["fly", "open the sky", "xyzzy", "think: hmm"]),
        ("won after 30 steps", look, ["look"] * 31 + walk_look),
        ("the walkthrough without its last step, then looks", put, walk_put[:-1] + ["look"] * 3),
        ("past 50 steps", look, ["inventory"] * 50 + walk_look),
    ]


def test_replayed_free_text_episodes_win_exactly_when_alfworld_says_so(world):
    root, items, prompts = world
    assert {it["task_type"] for it in items} == set(TYPES)
    wins = []
    for name, item, actions in episodes(items):
        actions = (actions + ["look"] * 50)[:50]       # an episode ends at its win or at step 50
        want = reference(root, item["gamefile"], actions, prompts)
        sample, seen = ours(root, item, actions)
        traj = sample.data["trajectory"]
        assert sample.data["won"] == want["won"], name
        assert len(traj) == want["steps"], name
        assert seen[-1] == want["last_prompt"], name          # the text completed at the last step
        assert [s["action"] for s in traj] == actions[:len(traj)], name      # sent verbatim
        wins.append(want["won"])
        if name == "won after 30 steps":
            assert want["won"] and want["steps"] > 30
    assert wins == [True, True, False, True, False, False]


def test_without_the_prompt_file_the_run_stops_with_a_clear_error(world, tmp_path):
    root, items, _ = world
    with pytest.raises(ValueError, match="does not exist: run `autorl-tui data get alfworld`"):
        get_scorer("env_success").evaluate(Replay([]), [items[0]], PROTOCOL, context(root, tmp_path / "missing.json"))


def test_the_prompt_file_in_the_home_is_placed_beside_the_games_and_used(world, tmp_path, monkeypatch):
    """Where `autorl-tui data get alfworld` puts the file (<home>/data/alfworld/react_prompts.json),
    materialization copies it beside the split's games, and the grader reads it from there."""
    from autorl_tui.catalog.tasks import load_task_card
    from autorl_tui.tasks.alfworld.provider import place_react_prompts
    root, items, prompts = world
    monkeypatch.delenv("ALFWORLD_REACT_PROMPTS", raising=False)
    data_home = tmp_path / "data"
    (data_home / "alfworld").mkdir(parents=True)
    (data_home / "alfworld" / "react_prompts.json").write_text(json.dumps(prompts))
    card = load_task_card(Path(__file__).parents[2] / "autorl_tui" / "tasks" / "alfworld", protocol="autorl-bench",
                          data_home=data_home)
    assert card.protocol.max_steps == 50 and card.scorer_options["react"] == "autorl-bench"
    split = tmp_path / "split"
    split.mkdir()
    place_react_prompts(card, split)
    assert json.loads((split / "react_prompts.json").read_text()) == prompts
    ctx = ScorerContext(task_dir=None, split="test", split_path=split, scratch_dir=split, log=lambda s: None,
                        options={"env": "alfworld", "react": "autorl-bench"})
    policy = Replay(items[0]["expert_actions"])
    result = get_scorer("env_success").evaluate(policy, [items[0]], PROTOCOL, ctx)
    assert result.samples[0].data["won"]
    assert policy.prompts[0].startswith("Interact with a household to solve a task. Here are two examples.\n"
                                        "You are in the middle of a room (put example 1)")

"""The `alfworld` benchmark's workspace SFT data is in the grader's ReAct text (AutoRL-Bench's
protocol): every trajectory of sft_react.jsonl parses as a ReAct transcript ("> think: ...",
"> command", observations) whose commands, replayed in alfworld's own `AlfredTWEnv` as AutoRL-Bench's
evaluator drives it, win at the last step, and each step's prompt in sft_prompt_completion.jsonl is
the text that evaluator builds from alfworld's observations at that step.

Games: generated in alfworld's on-disk format and laid out as `alfworld-download` does
(json_2.1.1/train/<task>/<trial>/); the prompt file is one the test writes in the format of
AutoRL-Bench's react_prompts.json (the real file is never copied into the project)."""

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.functional.test_alfworld_autorl import KEYS, reference

REPO = Path(__file__).resolve().parents[2]
TYPES = ("pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
         "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_two_obj_and_place")
TASK_HEADER = "\nHere is the task.\n"


@pytest.fixture(scope="module")
def train(tmp_path_factory):
    os.environ.setdefault("ALFWORLD_DATA", str(tmp_path_factory.mktemp("alfworld_data")))
    from autorl_tui.catalog.tasks import load_task_card, materialize
    from autorl_tui.tasks.alfworld.games import build_games
    tmp = tmp_path_factory.mktemp("alfworld_react_sft")
    made = build_games(tmp / "made", seed=7, n_per_type=1, task_types=TYPES)
    root = tmp / "official" / "json_2.1.1"
    for n, item in enumerate(made):
        dest = root / "train" / f"{item['task_type']}-X-None-Y-{n}" / "trial_T0001"
        dest.mkdir(parents=True)
        for name in ("game.tw-pddl", "traj_data.json"):
            shutil.copy2((tmp / "made" / item["gamefile"]).with_name(name), dest / name)
    (root / "valid_unseen").mkdir()
    prompts = {f"react_{k}_{i}": f"You are in the middle of a room ({k} example {i}).\n> think: plan {k}\nOK.\n"
               for k in KEYS for i in (0, 1)}
    data_home = tmp / "data"
    (data_home / "alfworld").mkdir(parents=True)
    (data_home / "alfworld" / "react_prompts.json").write_text(json.dumps(prompts))
    saved = {k: os.environ.get(k) for k in ("ALFWORLD_DATA", "ALFWORLD_REACT_PROMPTS")}
    os.environ["ALFWORLD_DATA"] = str(tmp / "official")
    os.environ.pop("ALFWORLD_REACT_PROMPTS", None)
    try:
        card = load_task_card(REPO / "autorl_tui" / "tasks" / "alfworld", data_home=data_home)
        split = materialize(card, "train", tmp / "cache")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return split, prompts


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def parse_react(text: str) -> tuple[str, list[tuple[str, str]]]:
    """(intro, [(command, observation)]) of a ReAct transcript: the task after the examples, then
    "\\n>" before each command, the command on its line, its observation below it."""
    task = text.split(TASK_HEADER, 1)[1]
    intro, *steps = task.split("\n>")
    assert steps[-1] == "", "a transcript ends with the prompt marker"
    out = []
    for chunk in steps[:-1]:
        m = re.fullmatch(r" (.+?)\n(.*)", chunk, re.S)
        assert m, f"not a ReAct step: {chunk!r}"
        out.append((m.group(1), m.group(2)))
    return intro, out


def test_the_sft_data_is_the_grader_s_react_text_and_replays_to_a_win(train):
    split, prompts = train
    assert not (split / "sft_chat.jsonl").exists() and not (split / "few_shot").exists()   # no chat data
    games = rows(split / "sft_react.jsonl")
    steps = rows(split / "sft_prompt_completion.jsonl")
    items = {it["id"]: it for it in rows(split / "items.jsonl")}
    assert len(games) == len(TYPES) and {g["task_type"] for g in games} == set(TYPES)
    for game in games:
        intro, transcript = parse_react(game["text"])
        actions = [a for a, _ in transcript]
        assert actions == game["actions"] and actions[0].startswith("think: To solve the task, I need to ")
        assert actions[1:] == items[game["game_id"]]["expert_actions"]     # the planner's walkthrough
        assert all(obs == "OK." for a, obs in transcript if a.startswith("think:"))
        gamefile = str(split / game["gamefile"])
        want = reference(split, gamefile, actions, prompts, games=split / "games")
        assert want["won"] and want["steps"] == len(actions), game["game_id"]
        mine = [s for s in steps if s["game_id"] == game["game_id"]]
        assert [s["step"] for s in mine] == list(range(1, len(actions) + 1))
        assert [s["completion"] for s in mine] == [f" {a}\n" for a in actions]
        assert mine[-1]["prompt"] == want["last_prompt"]      # AutoRL-Bench's text from alfworld's observations
        for s in mine:
            assert game["text"].startswith(s["prompt"] + s["completion"])
        assert intro in want["last_prompt"]


def test_the_plan_thought_names_the_goal_s_objects(train):
    from autorl_tui.tasks.alfworld.react import plan_thought
    split, _ = train
    for game in rows(split / "sft_react.jsonl"):
        traj = json.loads((split / game["gamefile"]).with_name("traj_data.json").read_text())
        assert traj["pddl_params"]["object_target"].lower() in game["actions"][0]
    assert plan_thought("heat", {"object_target": "Mug", "parent_target": "CoffeeMachine"}) == (
        "think: To solve the task, I need to find and take a mug, then heat it with microwave, then put it in/on "
        "coffeemachine.")
    assert plan_thought("examine", {"object_target": "Book", "toggle_target": ""}) is None

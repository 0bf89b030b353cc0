"""ALFWorld prompt building, reply parsing and admissible-command matching (no engine needed)."""

from autorl_tui.tasks.alfworld import games as G
from autorl_tui.tasks.alfworld.prompts import (FEW_SHOT, build_messages, match_action, normalize,
                                                    parse_reply)

ADMISSIBLE = ["go to countertop 1", "go to fridge 1", "inventory", "look", "move apple 1 to fridge 1",
              "take apple 1 from countertop 1"]


def test_exact_match_ignores_case_prompt_marks_and_trailing_period():
    assert match_action("> Go to Fridge 1.", ADMISSIBLE) == ("go to fridge 1", True)
    assert match_action("Action: look", ADMISSIBLE) == ("look", True)


def test_put_in_is_rewritten_to_the_engines_move_to():
    assert normalize("put apple 1 in/on fridge 1") == "move apple 1 to fridge 1"
    assert match_action("put apple 1 in fridge 1", ADMISSIBLE) == ("move apple 1 to fridge 1", True)


def test_near_miss_maps_to_closest_command_but_is_not_exact():
    assert match_action("take the apple 1 from countertop 1", ADMISSIBLE) == ("take apple 1 from countertop 1", False)


def test_gibberish_and_empty_replies_match_nothing():
    assert match_action("qzx wvv", ADMISSIBLE) == (None, False)
    assert match_action("", ADMISSIBLE) == (None, False)
    assert match_action(None, ADMISSIBLE) == (None, False)


def test_parse_reply_splits_thought_and_command():
    assert parse_reply("think: the apple is on the counter\ngo to countertop 1") == (
        "the apple is on the counter", "go to countertop 1")
    assert parse_reply("think: only thinking") == ("only thinking", None)
    assert parse_reply("\n  go to fridge 1\nlook") == (None, "go to fridge 1")


def test_prompt_shows_recent_history_and_counts_hidden_steps():
    history = [(f"go to shelf {i}", f"On the shelf {i}, you see nothing.") for i in range(1, 8)]
    msgs = build_messages("You are in the middle of a room.\n\nYour task is to: put a mug in shelf.",
                          history, ["look", "inventory"], task_type="pick_and_place_simple", history_len=3)
    user = msgs[-1]["content"]
    assert "(4 earlier step(s) not shown)" in user
    assert "> go to shelf 7" in user and "> go to shelf 4" not in user
    assert user.rstrip().endswith("Your next command:") and "Available commands: look, inventory" in user
    assert "example of a solved game" not in msgs[0]["content"]


def test_few_shot_examples_exist_for_every_task_type_and_go_in_the_system_message():
    assert set(FEW_SHOT) == set(G.TASK_TYPES)
    msgs = build_messages("intro", [], ["look"], task_type="pick_cool_then_place_in_recep", few_shot=True)
    assert FEW_SHOT["pick_cool_then_place_in_recep"] in msgs[0]["content"]


def test_planning_is_deterministic_by_seed_and_covers_every_task_type():
    for task_type in G.TASK_TYPES:
        sigs = []
        for _ in range(2):
            spec = next(G.candidates(task_type, 7, "seen", 12))
            assert spec.task_type == task_type and spec.floorplan in G.rooms("seen")
            sigs.append((spec.signature(), G.render_problem(spec)))
        assert sigs[0] == sigs[1]
    a = next(G.candidates("pick_and_place_simple", 7, "seen", 12)).signature()
    b = next(G.candidates("pick_and_place_simple", 8, "seen", 12)).signature()
    assert a != b


def test_unseen_rooms_are_disjoint_from_seen_rooms_and_exist_for_every_task_type():
    seen, unseen = set(G.rooms("seen")), set(G.rooms("unseen"))
    assert seen and unseen and not seen & unseen
    assert unseen <= G.UNSEEN_ROOMS
    for task_type, scenes in G.ROOMS_FOR_TASK.items():
        assert any(G.scene_of(n) in scenes for n in unseen), task_type


def test_planned_game_respects_receptacle_cap_and_does_not_start_solved():
    for task_type in ("pick_and_place_simple", "pick_heat_then_place_in_recep"):
        spec = next(G.candidates(task_type, 11, "seen", 8))
        assert len(spec.receptacles) <= 8
        parent = spec.params["parent_target"]
        for _, otype, ri in spec.objects:
            if otype == spec.params["object_target"]:
                assert spec.receptacles[ri].rtype != parent


def test_env_success_option_checks_used_by_tasks_validate():
    from pathlib import Path

    import yaml

    from autorl_tui.grading.scorers import get_scorer
    scorer = get_scorer("env_success")
    card_dir = Path(__file__).resolve().parents[2] / "autorl_tui" / "tasks" / "alfworld"
    card_opts = yaml.safe_load((card_dir / "task.yaml").read_text())["scorer_options"]
    assert scorer.validate_options(card_opts, card_dir) == []
    problems = scorer.validate_options({"env": "alfworld", "match_threshold": 2, "fewshot": True}, card_dir)
    assert len(problems) == 2 and all(fix for _, fix in problems)
    # an environment nobody registered: its options cannot be judged, the fix names the known ones
    (what, fix), = scorer.validate_options({"env": "webshop", "fewshot": True}, card_dir)
    assert "webshop" in what and "alfworld" in fix

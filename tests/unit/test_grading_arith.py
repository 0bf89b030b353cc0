from autorl_tui.tasks.arith import generator as arith
from autorl_tui.catalog.tasks import find_task, materialize, read_items, task_search_path
from autorl_tui.catalog.answers import extract_answer

import pytest


def test_generate_is_deterministic_and_well_formed():
    a = arith.generate("train", {"max_n": 20}, n=300, seed=42)
    b = arith.generate("train", {"max_n": 20}, n=300, seed=42)
    assert a == b
    assert a != arith.generate("train", {"max_n": 20}, n=300, seed=43)
    assert len({x["id"] for x in a}) == 300 and len({x["prompt"] for x in a}) == 300
    for x in a:
        assert extract_answer(x["solution"]).value == x["answer"]
        assert int(x["answer"]) >= 0
        assert x["teacher_solution"].rsplit("#### ", 1)[1].lstrip("-").isdigit()


def test_teacher_is_right_on_easy_and_wrong_on_hard_problems():
    items = arith.generate("train", {}, n=500, seed=1)
    easy = [x for x in items if not x["hard"]]
    hard = [x for x in items if x["hard"]]
    assert easy and hard
    assert all(x["teacher_solution"] == x["solution"] for x in easy)
    assert all(extract_answer(x["teacher_solution"]).value != x["answer"] for x in hard)


def test_held_out_questions_never_in_train():
    train = {x["prompt"] for x in arith.generate("train", {}, n=8000, seed=42)}
    dev = arith.generate("dev", {}, n=200, seed=5678)
    test = arith.generate("test", {}, n=400, seed=1234)
    assert not train & {x["prompt"] for x in dev}
    assert not train & {x["prompt"] for x in test}
    assert not {x["prompt"] for x in dev} & {x["prompt"] for x in test}


def test_bad_params_are_explained():
    with pytest.raises(ValueError, match="unknown generator param"):
        arith.generate("train", {"max": 3}, n=5, seed=0)
    with pytest.raises(ValueError, match="no split"):
        arith.generate("validation", {}, n=5, seed=0)


def test_task_card_materializes_all_splits(tmp_path):
    card = find_task("arith", task_search_path())
    assert card.scorer == "exact_match" and card.protocol.temperature == 0.0
    assert "#### N" in card.description or "####" in card.description
    sizes = {s: len(read_items(materialize(card, s, tmp_path))) for s in ("train", "dev", "test")}
    assert sizes == {"train": 8000, "dev": 200, "test": 400}

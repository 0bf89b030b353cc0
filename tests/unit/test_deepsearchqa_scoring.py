"""DeepSearchQA answer scoring and reply parsing, on hand-computed cases."""

import pytest

from autorl_tui.tasks.deepsearchqa.prompts import build_messages, parse_reply
from autorl_tui.tasks.deepsearchqa.scoring import normalize, score_answer, set_scores, token_f1


@pytest.mark.parametrize("raw, norm", [
    ("The Crown.", "crown"),
    ("  Ada   DORYO ", "ada doryo"),
    ("Café Zürich", "cafe zurich"),
    ("1,914,000", "1914000"),
    ("1914000.0", "1914000"),
    ("3.50", "3.5"),
    ("an apple, a pear", "apple pear"),
    ("v1.5", "v1.5"),
])
def test_normalization(raw, norm):
    assert normalize(raw) == norm


def test_single_answers_exact_match_and_token_f1():
    assert score_answer("the ducat", ["Ducat"])["correct"]
    assert score_answer("1914000", ["1,914,000"])["correct"]           # number formats
    assert not score_answer("1,914,001", ["1,914,000"])["correct"]
    # "Kael" vs "Kael Quosen": precision 1, recall 1/2 -> F1 = 2/3, not correct
    s = score_answer("Kael", ["Kael Quosen"])
    assert not s["correct"] and s["f1"] == pytest.approx(2 / 3)
    # best over several gold answers
    assert token_f1("Quosen Kael Smith", ["Nobody", "Kael Quosen"]) == pytest.approx(0.8)
    assert score_answer(None, ["x"]) == {"correct": False, "em": 0.0, "f1": 0.0, "precision": 0.0, "recall": 0.0}
    assert not score_answer("   ", ["x"])["correct"]


def test_list_answers_set_precision_and_recall():
    gold = ["Ada Doryo", "Wim Balmar", "Uma Tal"]
    full = score_answer("Uma Tal; ada doryo; Wim Balmar", gold, "list")
    assert full["correct"] and full["precision"] == 1.0 and full["recall"] == 1.0
    # partial list: 2 of 3 right, nothing extra -> P 1, R 2/3, F1 0.8, not correct
    part = score_answer("Ada Doryo, Wim Balmar", gold, "list")
    assert not part["correct"] and part["precision"] == 1.0 and part["recall"] == pytest.approx(2 / 3)
    assert part["f1"] == pytest.approx(0.8)
    # one extra, one missing: P 2/3, R 2/3
    assert set_scores("Ada Doryo and Wim Balmar and Kim Lo", gold) == (pytest.approx(2 / 3), pytest.approx(2 / 3))
    # duplicates count once
    assert set_scores("Uma Tal; Uma Tal", gold) == (1.0, pytest.approx(1 / 3))


def test_reply_parsing():
    assert parse_reply("search[Velora Works founder]") == (None, ("search", "Velora Works founder"))
    assert parse_reply("think: need the city\nOPEN[ D0042#2 ]") == ("need the city", ("open", "D0042#2"))
    assert parse_reply("answer[Ada; Wim] search[x]") == (None, ("answer", "Ada; Wim"))   # the first counts
    assert parse_reply("I think it is Halgriora") == (None, None)
    assert parse_reply("think: hmm") == ("hmm", None)


def test_prompt_shows_the_last_steps_and_counts_the_rest():
    history = [(f"search[q{i}]", f"result {i}") for i in range(6)]
    msgs = build_messages("Who?", history, step=7, max_steps=12, history_len=4)
    user = msgs[1]["content"]
    assert user.startswith("Question: Who?") and "(2 earlier step(s) not shown)" in user
    assert "> search[q5]\nresult 5" in user and "search[q1]" not in user
    assert user.endswith("Step 7 of 12. Your action:")

import pytest

from autorl_tui.catalog.answers import answers_match, canonical_number, extract_answer, gold_answer


@pytest.mark.parametrize("text, value, marker", [
    ("12 + 7 = 19\n#### 19", "19", True),
    ("#### 1,234", "1234", True),
    ("The total is $5.\n#### $5", "5", True),
    ("#### -3", "-3", True),
    ("#### 5.0", "5", True),
    ("#### 2.50", "2.5", True),
    ("#### 42.", "42", True),
    ("first #### 3 then again #### 4", "4", True),           # the last marker wins
    ("#### 7 apples because 7 = 3 + 4", "7", True),           # the first number after the marker
    ("12 - 7 = 5", "5", False),                               # no marker: the last number
    ("12 - 7", "7", False),                                   # "- 7" is the operator, not a negative number
    ("12-7", "7", False),
    ("It is -8 degrees", "-8", False),
    ("So he has 1,000,000 coins.", "1000000", False),
    ("the list 1,2,3", "3", False),                           # not a thousands group
    ("−4 (unicode minus)", "-4", False),
    ("#### ", None, True),                                    # marker without a number
    ("no numbers here", None, False),
    ("", None, False),
])
def test_extract_answer(text, value, marker):
    got = extract_answer(text)
    assert got.value == value
    assert got.has_marker is marker


def test_extract_none():
    assert extract_answer(None).value is None


@pytest.mark.parametrize("a, b, equal", [
    ("5", "5.0", True), ("5", "5.00", True), ("1,234", "1234", True), ("$7", "7", True),
    ("-3", "3", False), ("0.5", ".5", True), ("19", "91", False), ("-0", "0", True),
    (None, "1", False), ("abc", "abc", True), ("abc", "abd", False),
])
def test_answers_match(a, b, equal):
    assert answers_match(a, b) is equal


def test_canonical_number_rejects_garbage():
    assert canonical_number("12abc") is None
    assert canonical_number("nan") is None
    assert canonical_number("") is None


def test_gold_answer_from_gsm8k_style_and_plain():
    assert gold_answer({"answer": "She has 3 + 4 = <<3+4=7>>7\n#### 7"}) == "7"
    assert gold_answer({"answer": "1,000"}) == "1000"
    assert gold_answer({"answer": 12}) == "12"
    with pytest.raises(ValueError, match="no `answer`"):
        gold_answer({"id": "x"})
    with pytest.raises(ValueError, match="no number after ####"):
        gold_answer({"id": "x", "answer": "#### none"})

import pytest

from autorl_tui.grading.scorers import get_scorer
from autorl_tui.grading.scorers.exact_match import ExactMatchScorer, classify, pass_at_k
from autorl_tui.grading.types import Completion


@pytest.mark.parametrize("text, reason, expected, extracted, kind", [
    ("3 + 4 = 7\n#### 7", "stop", "7", "7", None),
    ("#### 7.0", "stop", "7", "7", None),
    ("3 + 4 = 7", "stop", "7", "7", None),                    # right number, no marker: still correct
    ("3 + 4 = 8\n#### 8", "stop", "7", "8", "wrong_answer"),
    ("3 + 4 = 8", "stop", "7", "8", "format_error"),
    ("I think the answer is", "stop", "7", None, "format_error"),
    ("I think the answer is", "length", "7", None, "truncated"),
    ("3 + 4 = 8\n####", "length", "7", None, "truncated"),
    ("   ", "stop", "7", None, "empty"),
    ("", "length", "7", None, "empty"),
])
def test_failure_taxonomy(text, reason, expected, extracted, kind):
    assert classify(Completion(text, 3, reason), expected) == (extracted, kind)


def test_pass_at_k_unbiased_estimator():
    assert pass_at_k(4, 0, 1) == 0.0
    assert pass_at_k(4, 4, 1) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert pass_at_k(5, 2, 5) == 1.0


def test_registered():
    scorer = get_scorer("exact_match")
    assert isinstance(scorer, ExactMatchScorer)
    with pytest.raises(KeyError, match="unknown scorer"):
        get_scorer("nope")

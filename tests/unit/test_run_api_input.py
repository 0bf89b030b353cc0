"""What the grading API accepts as a submission's path and as JSON, before anything is recorded."""

import pytest

from autorl_tui.engine.run_api import MAX_JSON_DEPTH, _nesting
from autorl_tui.grading_host.submissions import SubmissionRejected, check_model_path_text


@pytest.mark.parametrize("value,fragment", [
    ("output/v1\x00x", "NUL"), ("output/\ud800", "surrogate"), ("output/" + "a" * 256, "255"),
    ("output/" + "é" * 128, "255"),                     # 256 bytes in UTF-8, 128 characters
    ("output/" + "a/" * 2100, "4096"), ("output/v1\n", "control"), ("", "model_path"), ("   ", "model_path"),
    (5, "model_path"), (None, "model_path")])
def test_paths_that_cannot_name_a_folder_are_rejected_with_a_fix(value, fragment):
    with pytest.raises(SubmissionRejected) as info:
        check_model_path_text(value)
    assert fragment in str(info.value)
    assert info.value.code in ("bad_path", "bad_request")


@pytest.mark.parametrize("value", ["output/v1", "output/" + "a" * 255, "output/modèle-v2", "/abs/output/v1"])
def test_ordinary_paths_pass(value):
    check_model_path_text(value)


def test_json_nesting_is_measured_outside_strings():
    assert _nesting('{"model_path": "output/v1"}') == 1
    assert _nesting('{"model_path": "[[[[[[[[[[[[{{{{{{"}') == 1
    assert _nesting('{"a": "\\"[[[[[[[[[[[["}') == 1
    assert _nesting("[" * 5000 + "]" * 5000) > MAX_JSON_DEPTH
    assert _nesting('{"a": ' * 3 + "1" + "}" * 3) == 3

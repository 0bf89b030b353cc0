"""The grader's memory setting (grading/memory_limit.py)."""

import pytest

from autorl_tui.grading import memory_limit as ml


def test_sizes_parse_and_bad_ones_say_how_to_fix(monkeypatch):
    assert ml.parse_size("16G") == 16 << 30 and ml.parse_size("512m") == 512 << 20 and ml.parse_size("1.5GiB") == 3 << 29
    monkeypatch.setenv(ml.ENV, "0")
    assert ml.limit_bytes() is None
    monkeypatch.delenv(ml.ENV)
    assert ml.limit_bytes() == ml.default_bytes() >= ml.MIN_DEFAULT
    monkeypatch.setenv(ml.ENV, "plenty")
    with pytest.raises(ml.BadMemorySetting, match=r"AUTORL_GRADER_MEMORY='plenty' is not a size; use e.g. 16G"):
        ml.limit_bytes()


def test_out_of_memory_is_recognized_through_wrapping_but_not_gpu_memory():
    try:
        try:
            raise MemoryError()
        except MemoryError as exc:
            raise ValueError("cannot load the model") from exc
    except ValueError as wrapped:
        assert ml.looks_like_oom(wrapped)
    assert ml.looks_like_oom(text="OpenBLAS error: Memory allocation still failed after 10 retries")
    assert not ml.looks_like_oom(text="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB")
    assert not ml.looks_like_oom(ValueError("bad config"))
    assert "AUTORL_GRADER_MEMORY=32G" in ml.message(1 << 30) and "1.0 GiB" in ml.message(1 << 30)

"""The values that may cross between the trusted checker and code under test."""

import math

import pytest

from autorl_tui.grading.plain_data import NotPlain, dumps, loads


@pytest.mark.parametrize("value", [
    None, True, 0, -7, 10**40, 0.1, -0.0, 1e308, "héllo\n", [], [1, [2.5, "x"]], (1, 2), (), ((1,), [()]),
    {1, 2, 3}, frozenset({"a"}), {"a": 1, 2: [3], (1, 2): None}, b"\x00\xff", {"tuple": [1]},
])
def test_round_trip_is_exact_including_types(value):
    back = loads(dumps(value))
    assert back == value and type(back) is type(value)
    if isinstance(value, (list, tuple)):
        assert [type(x) for x in back] == [type(x) for x in value]


def test_non_finite_floats_cross():
    back = loads(dumps([float("inf"), float("-inf"), float("nan")]))
    assert back[0] == math.inf and back[1] == -math.inf and math.isnan(back[2])


@pytest.mark.parametrize("make", [
    lambda: type("AlwaysEqual", (), {"__eq__": lambda s, o: True})(),
    lambda: type("Int", (int,), {"__eq__": lambda s, o: True, "__hash__": int.__hash__})(3),
    lambda: type("Str", (str,), {"__eq__": lambda s, o: True, "__hash__": str.__hash__})("x"),
    lambda: [type("L", (list,), {})()],
    lambda: {"k": type("F", (float,), {})(1.0)},
    lambda: print, lambda: 1j, lambda: range(3),
])
def test_anything_else_is_refused(make):
    with pytest.raises(NotPlain):
        dumps(make())


@pytest.mark.parametrize("data", [b"{not json", b'{"set": [[1]]}', b'{"weird": [1]}', b'{"a": 1, "b": 2}', b"NaN",
                                  b'{"float": "zero"}', b"[" * 100000 + b"]" * 100000, b'{"dict": [[1]]}'])
def test_malformed_input_is_refused(data):
    with pytest.raises(NotPlain):
        loads(data)

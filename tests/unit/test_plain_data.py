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


def _standard_values():
    from collections import Counter, OrderedDict, defaultdict
    from fractions import Fraction

    import numpy as np

    counter = Counter("abca")
    counter["zero"], counter["neg"] = 0, -2
    return [counter, OrderedDict([(2, "b"), (1, "a")]), defaultdict(list, {1: [2]}), defaultdict(None, {"a": 1}),
            Fraction(-3, 4), np.int64(5), np.uint8(7), np.float32(1.5), np.float64("nan"), np.bool_(True),
            np.str_("x"), np.array([[1, 2], [3, 4]]), np.zeros((0, 3)), np.array(["a", "bc"]), [np.float64(0.1)]]


@pytest.mark.parametrize("index", range(15))
def test_standard_values_are_rebuilt_as_their_own_type(index):
    import numpy as np

    value = _standard_values()[index]
    back = loads(dumps(value))
    assert type(back) is type(value)
    if isinstance(value, np.ndarray):
        assert back.dtype == value.dtype and back.shape == value.shape and (back == value).all()
    elif isinstance(value, np.floating) and np.isnan(value):
        assert np.isnan(back)
    else:
        assert back == value
        if isinstance(value, dict):
            assert list(back.items()) == list(value.items())
            assert getattr(back, "default_factory", None) == getattr(value, "default_factory", None)


def _lying_values():
    from collections import Counter

    import numpy as np

    class SlyCounter(Counter):
        def __eq__(self, other):
            return True

    class SlyArray(np.ndarray):
        pass

    class SlyDict(dict):
        def items(self):
            return [("x", 1)]

    return [SlyCounter(a=1), np.zeros(2).view(SlyArray), SlyDict(a=1), np.array([1j]), np.datetime64("2020-01-01"),
            np.array([b"x"]), type("SlyFloat", (np.float64,), {"__module__": "numpy"})(0.5)]


@pytest.mark.parametrize("index", range(7))
def test_subclasses_and_other_dtypes_are_refused(index):
    with pytest.raises(NotPlain):
        dumps(_lying_values()[index])


def test_contents_are_read_with_the_class_methods_not_the_instance():
    from collections import Counter

    c = Counter(a=1)
    c.items = lambda: [("forged", 9)]
    assert loads(dumps(c)) == Counter(a=1)


@pytest.mark.parametrize("data", [b'{"Fraction": [1, 0]}', b'{"Fraction": [1.5, 2]}', b'{"numpy": ["complex128", 1]}',
                                  b'{"ndarray": ["int64", [3], [1, 2]]}', b'{"ndarray": ["int64", [-1], [1]]}',
                                  b'{"defaultdict": ["os.system", []]}', b'{"numpy": ["no such dtype", 1]}'])
def test_malformed_standard_values_are_refused(data):
    with pytest.raises(NotPlain):
        loads(data)

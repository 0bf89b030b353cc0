"""Plain data: the only values that cross between trusted code and code under test.

`to_plain` turns a value into JSON-able form, accepting exactly the builtin types (checked with
`type(v) is ...`, so subclasses of int/str/list with their own `__eq__` are refused) and tagging
what JSON lacks: tuples, sets, frozensets, dicts with any keys, bytes, non-finite floats.
`from_plain` rebuilds fresh builtin values and refuses anything else. Floats cross exactly (JSON
writes Python's shortest round-tripping repr).

Standard values the official HumanEval harness compares as they are cross too, rebuilt on the
trusted side as fresh values of the same type from plain parts: `Counter`, `OrderedDict` (its
order), `defaultdict` (a builtin default factory, else none), `Fraction`, and numpy scalars and
arrays (bool, int, uint, float and str dtypes; only when the program imported numpy). Their
exact types only: a subclass (with its own `__eq__`, or an array subclass) is refused like any
other object, and contents are read with the genuine class's methods (`dict.items(v)`), never
the instance's, so an `items` that lies is never called.

Stdlib only and free of harness imports: the sandbox driver embeds this file's source.
"""

import json
import sys
from collections import Counter, OrderedDict, defaultdict
from fractions import Fraction

MAX_DEPTH = 200
_NONFINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


class NotPlain(ValueError):
    pass


def to_plain(v, depth=0):
    if depth > MAX_DEPTH:
        raise NotPlain("nested too deeply")
    t = type(v)
    if v is None or t is bool or t is str or t is int:
        return v
    if t is float:
        if v != v or v in (float("inf"), float("-inf")):
            return {"float": "nan" if v != v else ("inf" if v > 0 else "-inf")}
        return v
    if t is list:
        return [to_plain(x, depth + 1) for x in v]
    if t is tuple:
        return {"tuple": [to_plain(x, depth + 1) for x in v]}
    if t is set or t is frozenset:
        return {t.__name__: [to_plain(x, depth + 1) for x in v]}
    if t is dict:
        return {"dict": [[to_plain(k, depth + 1), to_plain(x, depth + 1)] for k, x in v.items()]}
    if t is bytes:
        return {"bytes": v.hex()}
    if t is Counter or t is OrderedDict:
        return {t.__name__: _pairs(t.items(v), depth)}
    if t is defaultdict:
        factory = dict.get(_FACTORY_NAMES, v.default_factory) if type(v.default_factory) is type else None
        return {"defaultdict": [factory, _pairs(dict.items(v), depth)]}
    if t is Fraction:
        return {"Fraction": [to_plain(int(v.numerator), depth + 1), to_plain(int(v.denominator), depth + 1)]}
    np = sys.modules.get("numpy")
    if np is not None:
        if t is np.ndarray:
            _numpy_kind(np, v.dtype)
            return {"ndarray": [str(v.dtype), [int(n) for n in v.shape], to_plain(v.tolist(), depth + 1)]}
        if isinstance(v, np.generic) and t is _numpy_kind(np, v.dtype).type:
            return {"numpy": [str(v.dtype), to_plain(v.item(), depth + 1)]}
    raise NotPlain(f"a value of type {t.__name__!s:.80} is not plain data")


_FACTORIES = {"int": int, "float": float, "str": str, "list": list, "dict": dict, "set": set, "tuple": tuple,
              "frozenset": frozenset}
_FACTORY_NAMES = {f: name for name, f in _FACTORIES.items()}
_NUMPY_KINDS = "biufU"


def _pairs(items, depth):
    return [[to_plain(k, depth + 1), to_plain(x, depth + 1)] for k, x in items]


def _numpy_kind(np, dtype):
    """The dtype rebuilt from its name, when it is one of the plain kinds."""
    try:
        named = np.dtype(str(dtype))
        ok = named == dtype and named.kind in _NUMPY_KINDS
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise NotPlain(f"a numpy value of dtype {str(dtype)!s:.40} is not plain data")
    return named


def _from_numpy(tag, body, depth):
    import numpy as np

    if len(body) != (3 if tag == "ndarray" else 2) or type(body[0]) is not str:
        raise NotPlain(f"malformed {tag!r}")
    dtype = np.dtype(body[0])
    if dtype.kind not in _NUMPY_KINDS:
        raise NotPlain(f"numpy dtype {body[0]!r:.40} is not plain data")
    if tag == "numpy":
        return dtype.type(from_plain(body[1], depth + 1))
    shape = from_plain(body[1], depth + 1)
    if type(shape) is not list or not all(type(n) is int and n >= 0 for n in shape):
        raise NotPlain("malformed ndarray shape")
    return np.array(from_plain(body[2], depth + 1), dtype=dtype).reshape(shape)


def from_plain(x, depth=0):
    if depth > MAX_DEPTH:
        raise NotPlain("nested too deeply")
    t = type(x)
    if x is None or t is bool or t is str or t is int or t is float:
        return x
    if t is list:
        return [from_plain(e, depth + 1) for e in x]
    if t is dict and len(x) == 1:
        (tag, body), = x.items()
        try:
            if tag == "float" and body in _NONFINITE:
                return _NONFINITE[body]
            if tag == "bytes" and type(body) is str:
                return bytes.fromhex(body)
            if type(body) is not list:
                raise NotPlain(f"malformed {tag!r:.40}")
            if tag == "tuple":
                return tuple(from_plain(e, depth + 1) for e in body)
            if tag == "set":
                return {from_plain(e, depth + 1) for e in body}
            if tag == "frozenset":
                return frozenset(from_plain(e, depth + 1) for e in body)
            if tag == "dict":
                return {from_plain(k, depth + 1): from_plain(e, depth + 1) for k, e in body}
            if tag == "Counter" or tag == "OrderedDict":   # a Counter from a mapping keeps counts as they are
                pairs = [(from_plain(k, depth + 1), from_plain(e, depth + 1)) for k, e in body]
                return Counter(dict(pairs)) if tag == "Counter" else OrderedDict(pairs)
            if tag == "defaultdict" and len(body) == 2 and (body[0] is None or body[0] in _FACTORIES) \
                    and type(body[1]) is list:
                return defaultdict(_FACTORIES.get(body[0]), {from_plain(k, depth + 1): from_plain(e, depth + 1)
                                                             for k, e in body[1]})
            if tag == "Fraction" and len(body) == 2:
                num, den = from_plain(body[0], depth + 1), from_plain(body[1], depth + 1)
                if type(num) is not int or type(den) is not int:
                    raise NotPlain("malformed Fraction")
                return Fraction(num, den)
            if tag == "numpy" or tag == "ndarray":
                return _from_numpy(tag, body, depth)
        except (TypeError, ValueError, ZeroDivisionError) as exc:   # unhashable set element or key, bad pair, bad hex
            raise NotPlain(f"malformed {tag!r:.40}: {exc}") from None
    raise NotPlain(f"not plain data: {type(x).__name__}")


def _no_constants(name):
    raise NotPlain(f"{name} is not JSON")


def dumps(v) -> bytes:
    return json.dumps(to_plain(v), allow_nan=False, separators=(",", ":")).encode()


def loads(data: bytes):
    try:
        return from_plain(json.loads(data, parse_constant=_no_constants))
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        raise NotPlain(str(exc)[:200]) from None

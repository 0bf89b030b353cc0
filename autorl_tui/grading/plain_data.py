"""Plain data: the only values that cross between trusted code and code under test.

`to_plain` turns a value into JSON-able form, accepting exactly the builtin types (checked with
`type(v) is ...`, so subclasses of int/str/list with their own `__eq__` are refused) and tagging
what JSON lacks: tuples, sets, frozensets, dicts with any keys, bytes, non-finite floats.
`from_plain` rebuilds fresh builtin values and refuses anything else. Floats cross exactly (JSON
writes Python's shortest round-tripping repr).

Stdlib only and free of harness imports: the sandbox driver embeds this file's source.
"""

import json

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
    raise NotPlain(f"a value of type {t.__name__!s:.80} is not plain data")


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
        except (TypeError, ValueError) as exc:   # unhashable set element or key, bad pair, bad hex
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

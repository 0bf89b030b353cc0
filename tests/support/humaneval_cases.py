"""Honest HumanEval completions (function bodies) that return standard values other than the
builtins, or use numpy: the official harness passes them, and so must ours."""

STANDARD_VALUES = {
    "HumanEval/111": {     # histogram: a dict of the most frequent letters
        "counter": "    from collections import Counter\n    c = Counter(w for w in test.split(' ') if w)\n"
                   "    if not c:\n        return Counter()\n    top = max(c.values())\n"
                   "    return Counter({k: v for k, v in c.items() if v == top})\n",
        "ordered_dict": "    from collections import OrderedDict\n    words = [w for w in test.split(' ') if w]\n"
                        "    out = OrderedDict()\n    if not words:\n        return out\n"
                        "    top = max(words.count(w) for w in words)\n    for w in words:\n"
                        "        if words.count(w) == top:\n            out[w] = top\n    return out\n",
        "defaultdict": "    from collections import defaultdict\n    counts = defaultdict(int)\n"
                       "    for w in test.split(' '):\n        if w:\n            counts[w] += 1\n"
                       "    top = max(counts.values(), default=0)\n    out = defaultdict(int)\n"
                       "    for k, v in counts.items():\n        if v == top:\n            out[k] = v\n    return out\n",
    },
    "HumanEval/2": {       # truncate_number: the decimal part
        "fraction": "    from fractions import Fraction\n    return Fraction(number) % 1\n",
        "numpy_float": "    import numpy as np\n    return np.float64(number) % 1.0\n",
    },
    "HumanEval/4": {       # mean absolute deviation
        "numpy_mean": "    import numpy as np\n    a = np.array(numbers)\n    return np.mean(np.abs(a - a.mean()))\n",
    },
    "HumanEval/0": {       # has_close_elements: a bool
        "numpy_bool": "    import numpy as np\n    a = np.sort(np.array(numbers))\n"
                      "    return bool(len(a) > 1) and np.any(np.diff(a) < threshold)\n",
    },
    "HumanEval/13": {      # greatest_common_divisor: an int
        "numpy_int": "    import numpy as np\n    return np.gcd(np.int64(a), np.int64(b))\n",
    },
    "HumanEval/29": {      # filter_by_prefix: a list of str
        "numpy_strs": "    import numpy as np\n    return [str(s) for s in np.array(strings, dtype=object) "
                      "if s.startswith(prefix)]\n",
    },
}


def _fence(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code}```"


# Mutations of a canonical solution: (what it does, old, new); the first that applies is used.
MUTATIONS = [
    [("plus to minus", " + ", " - "), ("less to less-equal", " < ", " <= "), ("return first", "return ", "return 1 or ")],
    [("equal to not-equal", " == ", " != "), ("greater to greater-equal", " > ", " >= "), ("len off by one", "len(", "1 + len(")],
    [("True to False", "True", "False"), ("zero to one", "0", "1"), ("reverse sorted", "sorted(", "reversed(")],
]


def _mutant(canonical: str, options) -> str:
    for _, old, new in options:
        if old in canonical:
            return canonical.replace(old, new, 1)
    return canonical + "    pass\n"


def _wrapped(problem: dict) -> str:
    """The canonical function, then the entry point redefined as a thin wrapper around it."""
    ep = problem["entry_point"]
    return (problem["prompt"] + problem["canonical_solution"]
            + f"\n\n_impl_{ep} = {ep}\n\ndef {ep}(*args, **kwargs):\n    return _impl_{ep}(*args, **kwargs)\n")


def chat_replies(problem: dict) -> list[tuple[str, str]]:
    """(kind, reply text) pairs a chat model could give for one problem, honest ones only (right,
    wrong or malformed, never gaming the checker): 11 a problem."""
    prompt, canonical, ep = problem["prompt"], problem["canonical_solution"], problem["entry_point"]
    full = prompt + canonical
    out = [
        ("canonical fenced", _fence(full)),
        ("canonical unfenced", full),
        ("prose around, a broken second block", f"Here is the implementation:\n\n{_fence(full)}\n\nUsage:\n"
                                                f"{_fence(f'print({ep}(', 'py')}\nHope this helps."),
        ("helper wrapper", _fence(_wrapped(problem))),
        ("extra imports", _fence("import math\nimport itertools\nfrom collections import Counter\n" + full)),
        ("body only, unfenced", canonical),
        ("stub returning None", _fence(prompt + "    return None\n")),
        ("wrong block first", _fence(prompt + "    raise NotImplementedError\n") + "\nFixed:\n" + _fence(full)),
    ]
    out += [(f"mutant {options[0][0]}", _fence(prompt + _mutant(canonical, options))) for options in MUTATIONS]
    return out


def special_replies(problems: dict) -> list[tuple[str, str, str]]:
    """(task id, kind, reply): the standard-value and numpy cases, and slow ones (over and under 3 s)."""
    out = []
    for task_id, cases in STANDARD_VALUES.items():
        p = problems[task_id]
        out += [(task_id, f"standard value: {name}", _fence(p["prompt"] + body)) for name, body in cases.items()]
    for number, seconds in ((3, 6), (7, 6), (11, 6), (15, 6), (21, 0.2), (24, 0.2), (30, 0.2), (33, 0.2)):
        p = problems[f"HumanEval/{number}"]
        slow = f"import time\ntime.sleep({seconds})\n" + p["prompt"] + p["canonical_solution"]
        out.append((p["task_id"], f"slow: sleeps {seconds} s", _fence(slow)))
    return out

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

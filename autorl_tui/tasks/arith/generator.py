"""`arith`: procedurally generated one-step add/subtract word problems, GSM8K style (`#### N`).

Eleven templates. Eight are *easy*: the verb gives the operation away. Three are classic *hard*
types (compare, missing addend, compare-backwards; all subtraction) that a keyword heuristic
("more" means add) gets wrong. Each item carries a gold worked `solution` and a
`teacher_solution` written by that flawed heuristic: the cheap demonstrator an agent can imitate,
right on easy problems and wrong on hard ones. The gold final `answer` is the verifiable signal.

Held-out splits never share a question with `train`, by construction: every question hashes into
one of 100 buckets; `train` draws only from buckets HELD_OUT_BUCKETS..99, `dev` and `test` only from
their own buckets below that. No split needs to know the others' sizes or seeds.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

NAMES = [("Tom", "He"), ("Anna", "She"), ("Ben", "He"), ("Mia", "She"), ("Sam", "He"), ("Lily", "She"),
         ("Jack", "He"), ("Emma", "She"), ("Leo", "He"), ("Zoe", "She"), ("Max", "He"), ("Ava", "She"),
         ("Noah", "He"), ("Ella", "She"), ("Owen", "He"), ("Ruby", "She")]
ITEMS = ["apples", "marbles", "stickers", "books", "cookies", "pencils", "cards", "shells", "coins",
         "stamps", "balloons", "candies", "flowers", "toys", "eggs", "beads"]

# (template, gold operation, hard?). The equation is always "a op b" with a > b for subtraction.
TEMPLATES: list[tuple[str, str, bool]] = [
    ("{n} has {a} {i}. {p} buys {b} more {i}. How many {i} does {n} have now?", "+", False),
    ("{n} had {a} {i}. {p} found {b} more. How many {i} does {n} have in total?", "+", False),
    ("There are {a} {i} in a box. {n} puts {b} more {i} in the box. How many {i} are in the box now?", "+", False),
    ("{n} picked {a} {i} in the morning and {b} {i} in the afternoon. How many {i} did {n} pick altogether?",
     "+", False),
    ("{n} has {a} {i}. {p} gives {b} {i} to {m}. How many {i} does {n} have left?", "-", False),
    ("{n} had {a} {i}. {p} lost {b} of them. How many {i} are left?", "-", False),
    ("There are {a} {i} on a shelf. {n} takes {b} {i} away. How many {i} are on the shelf now?", "-", False),
    ("{n} had {a} {i} and sold {b} of them. How many {i} does {n} have now?", "-", False),
    # hard: the keyword heuristic reads "more" as addition
    ("{n} has {a} {i} and {m} has {b} {i}. How many more {i} does {n} have than {m}?", "-", True),
    ("{n} needs {a} {i}. {p} already has {b} {i}. How many more {i} does {n} need?", "-", True),
    ("{n} has {a} {i}. That is {b} more than {m} has. How many {i} does {m} have?", "-", True),
]
PLUS_WORDS = ("more", "buys", "found", "puts", "altogether", "total")
SPLIT_BUCKETS = {"dev": range(0, 10), "test": range(10, 20), "private": range(20, 25)}
HELD_OUT_BUCKETS = 25
DEFAULT_PARAMS = {"max_n": 10}


def keyword_op(question: str) -> str:
    """The flawed teacher's rule: a 'more'/'buys'/... word means addition, anything else subtraction."""
    return "+" if any(w in question for w in PLUS_WORDS) else "-"


def worked_solution(a: int, b: int, op: str) -> tuple[str, int]:
    if op == "-" and a < b:
        a, b = b, a
    c = a + b if op == "+" else a - b
    return f"{a} {op} {b} = {c}\n#### {c}", c


def bucket(question: str) -> int:
    return int(hashlib.sha256(question.encode()).hexdigest()[:8], 16) % 100


def make_problem(rng: random.Random, max_n: int = 10) -> dict[str, Any]:
    tmpl_index = rng.randrange(len(TEMPLATES))
    tmpl, op, hard = TEMPLATES[tmpl_index]
    (n, p), (m, _) = rng.sample(NAMES, 2)
    item = rng.choice(ITEMS)
    a, b = rng.randint(1, max_n), rng.randint(1, max_n)
    if op == "-" and a < b:
        a, b = b, a
    if op == "-" and a == b:
        a += 1
    question = tmpl.format(n=n, p=p, m=m, i=item, a=a, b=b)
    solution, c = worked_solution(a, b, op)
    teacher, _ = worked_solution(a, b, keyword_op(question))
    return {"prompt": question, "answer": str(c), "solution": solution, "teacher_solution": teacher,
            "template": tmpl_index, "hard": hard}


def _accept(split: str, question: str) -> bool:
    if split == "train":
        return bucket(question) >= HELD_OUT_BUCKETS
    if split in SPLIT_BUCKETS:
        return bucket(question) in SPLIT_BUCKETS[split]
    raise ValueError(f"arith has no split {split!r}; use train, dev, test or private")


def generate(split: str, params: dict | None = None, n: int = 100, seed: int = 0) -> list[dict]:
    """`n` distinct problems for `split`, deterministic for (params, n, seed)."""
    params = {**DEFAULT_PARAMS, **(params or {})}
    unknown = sorted(set(params) - set(DEFAULT_PARAMS))
    if unknown:
        raise ValueError(f"arith: unknown generator param(s) {unknown}; known: {sorted(DEFAULT_PARAMS)}")
    max_n = int(params["max_n"])
    if max_n < 2:
        raise ValueError(f"arith: max_n must be at least 2, got {max_n}")
    rng = random.Random(f"arith/{split}/{seed}")
    items: list[dict] = []
    seen: set[str] = set()
    attempts = 0
    while len(items) < n:
        attempts += 1
        if attempts > 200 * max(n, 10):
            raise ValueError(f"arith: could not draw {n} distinct {split} problems with max_n={max_n}; "
                             f"raise max_n or lower n")
        x = make_problem(rng, max_n)
        if x["prompt"] in seen or not _accept(split, x["prompt"]):
            continue
        seen.add(x["prompt"])
        items.append({"id": f"arith-{split}-{len(items):05d}", **x})
    return items

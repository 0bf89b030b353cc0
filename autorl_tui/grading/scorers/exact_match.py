"""Exact match on the final answer (math tasks): one generation pass over all prompts, the final
answer extracted (`#### N`, else the last number) and compared numerically with the gold answer.

Failure taxonomy of a wrong sample:
- `prompt_too_long`: the prompt left no room in the model's context (grading/context_budget.py);
- `empty`: the model produced no text;
- `truncated`: generation hit max_tokens and no answer could be read;
- `format_error`: no `####` marker (whether or not a trailing number was found);
- `wrong_answer`: the `####` format was used and the number is wrong.
With n > 1 samples per prompt, a prompt's score is the fraction of correct samples, and pass@k is
reported by the unbiased estimator for each k of the protocol.
"""

from __future__ import annotations

import time
from math import comb

from autorl_tui.catalog import answers_opencompass
from autorl_tui.catalog.answers import answers_match, extract_answer, gold_answer
from autorl_tui.grading import context_budget
from autorl_tui.grading.types import Completion, EvalProtocol, EvalResult, Policy, SampleResult, ScorerContext


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k estimator (Chen et al. 2021) for c correct out of n samples."""
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def classify(completion: Completion, expected: str) -> tuple[str | None, str | None]:
    """(extracted answer, failure_kind or None when correct)."""
    if context_budget.refused(completion):
        return None, context_budget.REFUSED
    if not completion.text.strip():
        return None, "empty"
    found = extract_answer(completion.text)
    if found.has_marker and answers_match(found.value, expected):
        return found.value, None
    if not found.has_marker and answers_match(found.value, expected):
        return found.value, None       # right number without the marker still counts
    if found.value is None and completion.finish_reason == "length":
        return None, "truncated"
    if not found.has_marker:
        return found.value, "format_error"
    return found.value, "wrong_answer"


def classify_opencompass(completion: Completion, expected: str) -> tuple[str | None, str | None]:
    """As `classify`, with OpenCompass's GSM8K extraction and comparison (scorer option
    `extraction: opencompass-gsm8k`; catalog/answers_opencompass.py): `expected` is its gold."""
    if context_budget.refused(completion):
        return None, context_budget.REFUSED
    if not completion.text.strip():
        return None, "empty"
    pred = answers_opencompass.extract(completion.text)
    if answers_opencompass.is_equal(pred, expected):
        return pred, None
    if pred == "NULL":
        return None, "truncated" if completion.finish_reason == "length" else "format_error"
    return pred, "wrong_answer"


EXTRACTIONS = {"default": (classify, gold_answer),
               "opencompass-gsm8k": (classify_opencompass, lambda item: answers_opencompass.gold(str(item["answer"])))}


class ExactMatchScorer:
    name = "exact_match"
    version = "1"

    def evaluate(self, policy: Policy, items: list[dict], protocol: EvalProtocol,
                 ctx: ScorerContext) -> EvalResult:
        if not items:
            raise ValueError(f"split {ctx.split} has no items to score")
        extraction = str(ctx.options.get("extraction", "default"))
        if extraction not in EXTRACTIONS:
            raise ValueError(f"unknown extraction {extraction!r}; known: {', '.join(EXTRACTIONS)}")
        judge, gold_of = EXTRACTIONS[extraction]
        expected = []
        for item in items:
            if "prompt" not in item:
                raise ValueError(f"item {item.get('id', '?')} of split {ctx.split} has no `prompt`")
            expected.append(gold_of(item))
        t0 = time.perf_counter()
        outputs = policy.generate([protocol.build_prompt(it) for it in items], n=protocol.n, temperature=protocol.temperature,
                                  top_p=protocol.top_p, max_tokens=protocol.max_tokens, stop=protocol.stop)
        t_inf = time.perf_counter() - t0
        samples: list[SampleResult] = []
        kinds: dict[str, int] = {}
        correct_per_prompt: list[int] = []
        total_tokens = 0
        for item, gold, completions in zip(items, expected, outputs):
            verdicts = [judge(c, gold) for c in completions]
            n_ok = sum(kind is None for _, kind in verdicts)
            correct_per_prompt.append(n_ok)
            first, (extracted, kind) = completions[0], verdicts[0]
            total_tokens += sum(c.tokens for c in completions)
            if kind:
                kinds[kind] = kinds.get(kind, 0) + 1
            data = None
            if len(completions) > 1:
                data = {"samples": [{"output": c.text, "extracted": e, "failure_kind": k, "tokens": c.tokens}
                                    for c, (e, k) in zip(completions, verdicts)]}
            samples.append(SampleResult(
                sample_id=str(item.get("id", len(samples))), prompt=str(item["prompt"]), output=first.text,
                extracted=extracted, expected=gold, correct=kind is None, score=n_ok / len(completions),
                tokens=first.tokens, failure_kind=kind, error=context_budget.refused(first), data=data))
        n = len(items)
        accuracy = 100.0 * sum(s.score for s in samples) / n
        metrics = {"accuracy": round(accuracy, 4), "n": n, "correct": sum(s.correct for s in samples),
                   "format_rate": round(sum(extract_answer(s.output).has_marker for s in samples) / n, 4),
                   "failure_kinds": kinds, "mean_tokens": round(total_tokens / (n * protocol.n), 2)}
        if protocol.n > 1:
            for k in protocol.k:
                if k <= protocol.n:
                    metrics[f"pass@{k}"] = round(
                        100.0 * sum(pass_at_k(protocol.n, c, k) for c in correct_per_prompt) / n, 4)
        return EvalResult(score=round(accuracy, 4), metrics=metrics, samples=samples,
                          timings={"generate_s": round(t_inf, 4)})

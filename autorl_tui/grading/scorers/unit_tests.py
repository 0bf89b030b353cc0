"""`unit_tests` scorer: run each completion against the problem's tests in the sandbox.

Items (HumanEval layout): `prompt` (the function's start), `entry_point`, `test` (defines
`check(candidate)`). The program run for a completion is `prompt + body + test +
check(entry_point)`; a completion that repeats the function or fences its code is reduced to
its code first (see `build_program`).

With protocol n > 1, pass@k uses the unbiased estimator of Chen et al. (2021):
pass@k = E_problems[1 - C(n-c, k) / C(n, k)] for c correct of n samples.

Scorer options: timeout_s, cpu_s, memory_mb, workers, nproc, output_bytes (sandbox limits).
"""

from __future__ import annotations

import re
import time
from math import comb
from typing import Any

from autorl_tui.grading.sandbox import Sandbox, SandboxLimits, SandboxOutcome
from autorl_tui.grading.types import Completion, EvalProtocol, EvalResult, Policy, SampleResult, ScorerContext

FENCE = re.compile(r"```[ \t]*(?:python|py|Python)?[ \t]*\n(.*?)(?:```|\Z)", re.S)
CHAT_INSTRUCTION = ("Complete the following Python function. Reply with the complete function in a "
                    "```python code block.\n\n```python\n{prompt}```")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of the probability that at least one of k samples (of n, c correct) passes."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per problem, protocol n is {n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def extract_code(text: str, entry_point: str) -> str:
    """The code in a completion: the fenced block (the one defining entry_point if several) or the text."""
    blocks = FENCE.findall(text)
    if blocks:
        for block in blocks:
            if re.search(rf"\bdef\s+{re.escape(entry_point)}\s*\(", block):
                return block
        return blocks[0]
    return text


def build_program(item: dict, completion: str) -> str:
    code = extract_code(completion, item["entry_point"])
    redefines = re.search(rf"^\s*def\s+{re.escape(item['entry_point'])}\s*\(", code, re.M)
    if redefines:
        # The prompt alone (signature + docstring) is a valid function; the completion's own
        # definition replaces it and the prompt still supplies the imports.
        import textwrap
        body = item["prompt"] + "\n" + textwrap.dedent(code)
    else:
        body = item["prompt"] + code
    return f"{body}\n\n{item['test']}\n\ncheck({item['entry_point']})\n"


def failure_kind(outcome: SandboxOutcome, completion: Completion) -> str:
    if outcome.reason in ("timeout", "cpu_time"):
        return "timeout"
    if outcome.reason == "syntax_error":
        return "truncated" if completion.finish_reason == "length" else "format_error"
    if outcome.reason == "runtime_error" and outcome.error_type == "AssertionError":
        return "wrong_answer"
    return "runtime_error"


class UnitTestsScorer:
    name = "unit_tests"
    version = "1"
    item_fields = ("id", "prompt", "entry_point", "test")

    def validate_options(self, options: dict, task_dir) -> list[tuple[str, str]]:
        """(problem, fix) pairs for `autorl-tui tasks validate`."""
        problems = []
        for key in ("timeout_s", "cpu_s", "memory_mb", "workers", "nproc", "output_bytes"):
            value = options.get(key)
            if value is not None and (not isinstance(value, (int, float)) or value <= 0):
                problems.append((f"scorer_options.{key} is {value!r}", f"use a positive number for {key}"))
        return problems

    def evaluate(self, policy: Policy, items: list[dict], protocol: EvalProtocol,
                 ctx: ScorerContext) -> EvalResult:
        opts = dict(ctx.options or {})
        if not items:
            raise ValueError("unit_tests: no items to evaluate (is the split empty?)")
        for item in items:
            missing = [k for k in ("id", "prompt", "entry_point", "test") if k not in item]
            if missing:
                raise ValueError(f"unit_tests: item {item.get('id', '?')} lacks {', '.join(missing)}; "
                                 "items need id, prompt, entry_point and test (which defines check(candidate))")
        ks = sorted(set(int(k) for k in (protocol.k or [1])) | {1})
        too_big = [k for k in ks if k > protocol.n]
        if too_big:
            raise ValueError(f"unit_tests: pass@{too_big[0]} needs protocol n >= {too_big[0]} (n is {protocol.n}); "
                             "raise protocol.n or drop it from protocol.k")
        t0 = time.monotonic()
        if protocol.prompt_format == "chat":
            prompts: list[Any] = []
            for item in items:
                msgs = [{"role": "system", "content": protocol.system_prompt}] if protocol.system_prompt else []
                prompts.append(msgs + [{"role": "user", "content": CHAT_INSTRUCTION.format(prompt=item["prompt"])}])
        else:
            prompts = [item["prompt"] for item in items]
        completions = policy.generate(prompts, n=protocol.n, temperature=protocol.temperature, top_p=protocol.top_p,
                                      max_tokens=protocol.max_tokens, stop=protocol.stop)
        if len(completions) != len(items):
            raise ValueError(f"unit_tests: the policy returned {len(completions)} completion lists for {len(items)} prompts")
        t_gen = time.monotonic()

        limits = SandboxLimits(wall_s=float(opts.get("timeout_s", 10)), cpu_s=int(opts.get("cpu_s", 10)),
                               memory_mb=int(opts.get("memory_mb", 1024)), nproc=int(opts.get("nproc", 32)),
                               output_bytes=int(opts.get("output_bytes", 16 * 1024)))
        jobs: list[tuple[int, int, Completion]] = []     # (item index, sample index, completion)
        programs: list[str] = []
        for i, (item, comps) in enumerate(zip(items, completions)):
            for j, comp in enumerate(comps[: protocol.n]):
                jobs.append((i, j, comp))
                programs.append(build_program(item, comp.text) if comp.text.strip() else "")
        sandbox = Sandbox(limits, workers=int(opts.get("workers", 2)), base_dir=ctx.scratch_dir)
        try:
            to_run = [p for p in programs if p]
            outcomes_iter = iter(sandbox.run_many(to_run))
            outcomes = [next(outcomes_iter) if p else None for p in programs]
        finally:
            sandbox.close()
        t_run = time.monotonic()

        samples: list[SampleResult] = []
        correct_per_item = [0] * len(items)
        for (i, j, comp), program, outcome in zip(jobs, programs, outcomes):
            item = items[i]
            sample_id = str(item["id"]) if protocol.n == 1 else f"{item['id']}#{j}"
            prompt_text = item["prompt"]
            if outcome is None:
                samples.append(SampleResult(sample_id, prompt=prompt_text, output=comp.text, correct=False, score=0.0,
                                            tokens=comp.tokens, failure_kind="empty", error="empty completion",
                                            data={"problem_id": item["id"], "sample": j}))
                continue
            ok = outcome.passed
            correct_per_item[i] += int(ok)
            samples.append(SampleResult(
                sample_id, prompt=prompt_text, output=comp.text, extracted=program, correct=ok, score=float(ok),
                tokens=comp.tokens, failure_kind=None if ok else failure_kind(outcome, comp),
                error=None if ok else _error_text(outcome),
                data={"problem_id": item["id"], "sample": j, "reason": outcome.reason, "lineno": outcome.lineno,
                      "line": outcome.line, "duration_s": round(outcome.duration_s, 4),
                      "output_truncated": outcome.output_truncated, "stdout": outcome.stdout[-2000:],
                      "stderr": outcome.stderr[-2000:]}))
        metrics: dict[str, Any] = {}
        n = protocol.n
        for k in ks:
            vals = [pass_at_k(n, c, k) for c in correct_per_item]
            metrics[f"pass@{k}"] = 100.0 * sum(vals) / len(vals) if vals else 0.0
        kinds: dict[str, int] = {}
        for s in samples:
            if s.failure_kind:
                kinds[s.failure_kind] = kinds.get(s.failure_kind, 0) + 1
        executed = sum(1 for p in programs if p)
        metrics.update({"n_problems": len(items), "n_completions": len(samples), "n_passed": sum(correct_per_item),
                        "failure_kinds": kinds, "sandbox": sandbox.isolation,
                        "sandbox_executions_per_s": round(executed / (t_run - t_gen), 2) if executed and t_run > t_gen else None})
        return EvalResult(score=metrics["pass@1"], metrics=metrics, samples=samples,
                          timings={"inference_s": t_gen - t0, "scoring_s": t_run - t_gen})


def _error_text(outcome: SandboxOutcome) -> str:
    text = outcome.error or outcome.reason or "failed"
    if outcome.lineno is not None and outcome.line:
        text += f" (line {outcome.lineno}: {outcome.line})"
    return text

"""`unit_tests` scorer: check each completion with the problem's tests, never in its process.

Items (HumanEval layout): `prompt` (the function's start), `entry_point`, `test` (defines
`check(candidate)`). The solution is `prompt + completion` (a completion that fences its code or
repeats the function is reduced to its code first, see `solution_source`); it runs in the
sandbox, and the test runs here, in the harness, calling it over a channel that carries only
plain data (grading/code_protocol.py); under the engine that sandbox is the engine's code server,
a process apart from this (sandboxed, unprivileged) worker (grading/sandbox_remote.py). So a
completion cannot forge a pass (exit early, print a marker, patch the checker), return an object
that equals anything, or read the expected values:
they never enter its process. The task's data files are hidden from the sandbox as well
(`hide_packages`, the task folder and the split file).

With protocol n > 1, pass@k uses the unbiased estimator of Chen et al. (2021):
pass@k = E_problems[1 - C(n-c, k) / C(n, k)] for c correct of n samples.

Scorer options: extraction (`default`: as above; `opencompass-v2`: OpenCompass's
humaneval_postprocess_v2, the first fenced block else the text, left-stripped, after the prompt,
as AutoRL-Bench runs HumanEval), timeout_s (wall time per completion, its tests included), call_timeout_s (per
call of the candidate; default timeout_s), cpu_s, memory_mb, workers, nproc, output_bytes (sandbox
limits); hide_packages (Python packages whose folders the sandbox must not see, e.g. the one that
ships the problems and their tests).
"""

from __future__ import annotations

import ast
import importlib.util
import re
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from math import comb
from pathlib import Path
from typing import Any

from autorl_tui.grading import context_budget
from autorl_tui.grading.code_protocol import CheckResult, run_check
from autorl_tui.grading.sandbox import SandboxLimits
from autorl_tui.grading.sandbox_remote import code_sandbox
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


def _parses(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def solution_source(item: dict, completion: str) -> str:
    """The program that defines the candidate: the prompt, then the completion's code.

    As the official harness: `prompt + code`; except an indented copy of the whole function (the
    code, dedented, is only imports and definitions, one of them the entry point), which follows
    the prompt dedented. A body that defines an inner helper named like the entry point and then
    returns is a body: dedented, its `return` is at the top level, so it is not such a copy."""
    code = extract_code(completion, item["entry_point"])
    dedented = textwrap.dedent(code)
    if dedented != code:
        tree = _parses(dedented)
        defs = (ast.FunctionDef, ast.AsyncFunctionDef)
        if tree is not None and any(isinstance(n, defs) and n.name == item["entry_point"] for n in tree.body) \
                and all(isinstance(n, (*defs, ast.ClassDef, ast.Import, ast.ImportFrom)) for n in tree.body):
            return item["prompt"] + "\n" + dedented
    return item["prompt"] + code


def opencompass_v2(text: str) -> str:
    """OpenCompass's `humaneval_postprocess_v2` (opencompass/datasets/humaneval.py), as
    AutoRL-Bench's HumanEval runs it: the first fenced block, else the text; left-stripped."""
    blocks = re.findall(r"```\w*\n(.*?)```", text, re.DOTALL)
    if len(blocks) >= 1:
        text = blocks[0]
    return text.lstrip()


# Scorer option `extraction`: how the program is made from a completion.
EXTRACTIONS = {"default": solution_source,
               "opencompass-v2": lambda item, completion: item["prompt"] + opencompass_v2(completion)}


def failure_kind(check: CheckResult, completion: Completion) -> str:
    if check.failure_kind == "format_error" and completion.finish_reason == "length":
        return "truncated"
    return check.failure_kind or "runtime_error"


def hidden_paths(opts: dict, ctx: ScorerContext) -> list[Path]:
    """Where the problems and their tests live on this host: the sandbox must not see them."""
    paths = [Path(ctx.task_dir), Path(ctx.split_path)]
    for name in opts.get("hide_packages") or ():
        try:
            spec = importlib.util.find_spec(str(name))
        except (ImportError, ValueError):
            spec = None
        for location in (spec.submodule_search_locations or []) if spec else []:
            paths.append(Path(location))
    return paths


class UnitTestsScorer:
    name = "unit_tests"
    version = "2"
    item_fields = ("id", "prompt", "entry_point", "test")

    def validate_options(self, options: dict, task_dir) -> list[tuple[str, str]]:
        """(problem, fix) pairs for `autorl-tui tasks validate`."""
        problems = []
        for key in ("timeout_s", "call_timeout_s", "cpu_s", "memory_mb", "workers", "nproc", "output_bytes"):
            value = options.get(key)
            if value is not None and (not isinstance(value, (int, float)) or value <= 0):
                problems.append((f"scorer_options.{key} is {value!r}", f"use a positive number for {key}"))
        hide = options.get("hide_packages")
        if hide is not None and (not isinstance(hide, list) or not all(isinstance(h, str) for h in hide)):
            problems.append((f"scorer_options.hide_packages is {hide!r}", "use a list of Python package names"))
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
        extraction = str(opts.get("extraction", "default"))
        if extraction not in EXTRACTIONS:
            raise ValueError(f"unit_tests: unknown extraction {extraction!r}; known: {', '.join(EXTRACTIONS)}")
        make_solution = EXTRACTIONS[extraction]
        t0 = time.monotonic()
        if protocol.prompt_template is not None or protocol.shots:     # the protocol writes the prompt
            prompts = [protocol.build_prompt(item) for item in items]
        elif protocol.prompt_format == "chat":
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
        for i, comps in enumerate(completions):
            for j, comp in enumerate(comps[: protocol.n]):
                jobs.append((i, j, comp))
        solutions = [make_solution(items[i], comp.text) if comp.text.strip() else None for i, _, comp in jobs]
        workers = int(opts.get("workers", 2))
        call_timeout = float(opts.get("call_timeout_s", limits.wall_s))
        sandbox = code_sandbox(limits, workers=workers, base_dir=ctx.scratch_dir, hide=hidden_paths(opts, ctx))
        try:
            def check(k: int) -> CheckResult | None:
                if solutions[k] is None:
                    return None
                return run_check(sandbox, items[jobs[k][0]], solutions[k], call_timeout)
            with ThreadPoolExecutor(workers) as pool:
                checks = list(pool.map(check, range(len(jobs))))
        finally:
            sandbox.close()
        t_run = time.monotonic()

        samples: list[SampleResult] = []
        correct_per_item = [0] * len(items)
        for (i, j, comp), solution, result in zip(jobs, solutions, checks):
            item = items[i]
            sample_id = str(item["id"]) if protocol.n == 1 else f"{item['id']}#{j}"
            prompt_text = item["prompt"]
            if result is None:
                why = context_budget.refused(comp)
                samples.append(SampleResult(sample_id, prompt=prompt_text, output=comp.text, correct=False, score=0.0,
                                            tokens=comp.tokens, failure_kind=context_budget.REFUSED if why else "empty",
                                            error=why or "empty completion",
                                            data={"problem_id": item["id"], "sample": j}))
                continue
            ok = result.passed
            outcome = result.outcome
            correct_per_item[i] += int(ok)
            samples.append(SampleResult(
                sample_id, prompt=prompt_text, output=comp.text, extracted=solution, correct=ok, score=float(ok),
                tokens=comp.tokens, failure_kind=None if ok else failure_kind(result, comp),
                error=None if ok else result.error,
                data={"problem_id": item["id"], "sample": j, "calls": result.calls, "reason": outcome.reason,
                      "lineno": outcome.lineno, "line": outcome.line, "duration_s": round(result.duration_s, 4),
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
        executed = sum(1 for p in solutions if p is not None)
        metrics.update({"n_problems": len(items), "n_completions": len(samples), "n_passed": sum(correct_per_item),
                        "failure_kinds": kinds, "sandbox": sandbox.isolation,
                        "sandbox_executions_per_s": round(executed / (t_run - t_gen), 2) if executed and t_run > t_gen else None})
        return EvalResult(score=metrics["pass@1"], metrics=metrics, samples=samples,
                          timings={"inference_s": t_gen - t0, "scoring_s": t_run - t_gen})

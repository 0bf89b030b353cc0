"""`judge` scorer: pairwise LLM-as-judge against a reference output.

For each item (`id`, `prompt`, `reference`), the policy's output and the reference are shown to
an OpenAI-compatible chat model as responses A and B; which one is A is drawn per item from
`Random(f"{seed}:{id}")` and recorded. Verdict A/B/tie -> the candidate wins (1), ties (0.5) or
loses (0). Score: win rate in percent over the items that were judged.

- **Errors are never zeros.** A judge timeout, HTTP error or unparsable reply makes that sample
  `failure_kind: runtime_error` with the error text; it is left out of the win rate and counted
  in `metrics.n_judge_errors`. If every judgment fails, the evaluation fails.
- **Cache.** Verdicts are cached on disk by (judge model, template version, instruction, A, B);
  a hit sends no request. Location: option `cache_path`, else $AUTORL_JUDGE_CACHE, else
  `<home>/cache/judge.sqlite`.
- **Drift guard.** A fixed anchor set (option `anchors`: a JSONL file beside the card with
  `prompt, output_a, output_b, expected` A|B|tie) is re-judged on every evaluation in both orders,
  bypassing the cache; `metrics.anchor_agreement` is the fraction matching, and
  `metrics.judge_drift` is true when it falls below `anchor_min_agreement` (default 0.8).
- **Length control.** Judges favour longer answers. Beside the raw win rate we fit
  P(win) = sigmoid(b0 + b1 * tanh(d / sd(d))), d = candidate length - reference length (characters),
  sd(d) the sample standard deviation of d (about its mean, n - 1 in the denominator, as pandas'
  `std()` in alpaca-eval's `length_controlled_v1`), by fractional logistic regression (ties as
  0.5, a very light L2 on b1) and report sigmoid(b0): the win rate the candidate would have at equal
  length. This is AlpacaEval 2's LC win rate without its per-instruction difficulty term and its
  regularization towards gamed baselines (both need alpaca-eval's own annotation sets).
- **Cost.** Tokens from each reply's `usage`; `price_per_input_token` / `price_per_output_token`
  (USD) give `metrics.judge_cost_usd`. Cache hits cost nothing and are counted apart.

Options: judge_url (or $AUTORL_JUDGE_URL), judge_model, api_key_env, timeout_s (60), retries
(1), concurrency (4), max_tokens (64), anchors, anchor_min_agreement, cache_path, prices.
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from autorl_tui.grading import context_budget
from autorl_tui.grading.judge_cache import JudgeCache, judgment_key
from autorl_tui.grading.judge_client import JudgeClient, JudgeError
from autorl_tui.grading.types import EvalProtocol, EvalResult, Policy, SampleResult, ScorerContext
from autorl_tui import settings

TEMPLATE_VERSION = "pairwise-v1"
SYSTEM = ("You are an impartial judge of answers to user instructions. Compare two responses for "
          "helpfulness, correctness, relevance and clarity. Ignore the order in which they are shown "
          "and do not prefer a response for being longer.")
USER = ("[Instruction]\n{prompt}\n\n[Response A]\n{a}\n\n[Response B]\n{b}\n\n"
        "Which response is better? Reply with exactly one line: `Verdict: A`, `Verdict: B` or `Verdict: tie`.")
VERDICT = re.compile(r"verdict\s*[:=]?\s*\[*\**\s*(A|B|tie)\b", re.I)
BARE = re.compile(r"^\W*(A|B|tie)\W*$", re.I)


def parse_verdict(text: str) -> str:
    """'A', 'B' or 'tie'; raises JudgeError when the reply does not say which."""
    found = VERDICT.findall(text)
    if not found:
        bare = BARE.match(text.strip())
        found = [bare.group(1)] if bare else []
    if not found:
        raise JudgeError(f"malformed judge reply (no verdict A, B or tie): {text[:200]!r}")
    v = found[-1]
    return "tie" if v.lower() == "tie" else v.upper()


def judge_messages(prompt: str, a: str, b: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER.format(prompt=prompt, a=a, b=b)}]


def instruction_prompts(items: list[dict], protocol: EvalProtocol) -> list[Any]:
    """Each item's instruction as the policy sees it: one user turn (after the protocol's system
    text) for `chat`, the text itself for `plain`."""
    if protocol.prompt_format != "chat":
        return [it["prompt"] for it in items]
    system = [{"role": "system", "content": protocol.system_prompt}] if protocol.system_prompt else []
    return [system + [{"role": "user", "content": it["prompt"]}] for it in items]


def length_controlled_win_rate(outcomes: list[float], length_diffs: list[float]) -> tuple[float, float]:
    """(win rate at zero length difference, slope b1). See the module docstring."""
    n = len(outcomes)
    if n == 0:
        return float("nan"), 0.0
    mean = sum(length_diffs) / n
    # The standard deviation, not the root mean square: with d mostly of one sign they differ a lot.
    sd = math.sqrt(sum((d - mean) ** 2 for d in length_diffs) / (n - 1)) if n > 1 else 0.0
    xs = [math.tanh(d / sd) if sd > 0 else 0.0 for d in length_diffs]
    b0 = b1 = 0.0
    lam = 1e-3   # only keeps a perfectly separated fit finite; alpaca-eval picks its penalty by CV, mostly weak
    for _ in range(100):   # Newton's method on the penalized log-likelihood
        g0 = g1 = h00 = h01 = h11 = 0.0
        for x, y in zip(xs, outcomes):
            p = 1.0 / (1.0 + math.exp(-(b0 + b1 * x)))
            w = p * (1 - p)
            g0 += y - p
            g1 += (y - p) * x
            h00 += w
            h01 += w * x
            h11 += w * x * x
        g1 -= lam * b1
        h11 += lam
        h00 += 1e-9
        det = h00 * h11 - h01 * h01
        if det <= 0:
            break
        d0 = (h11 * g0 - h01 * g1) / det
        d1 = (h00 * g1 - h01 * g0) / det
        b0 = max(-20.0, min(20.0, b0 + d0))
        b1 = max(-20.0, min(20.0, b1 + d1))
        if abs(d0) + abs(d1) < 1e-10:
            break
    return 1.0 / (1.0 + math.exp(-b0)), b1


def default_cache_path() -> Path:
    configured = settings.current().judge_cache
    if configured:
        return configured
    from autorl_tui.home import resolve_home
    return resolve_home() / "cache" / "judge.sqlite"


class JudgeScorer:
    name = "judge"
    version = "2"
    item_fields = ("id", "prompt", "reference")

    def evaluate(self, policy: Policy, items: list[dict], protocol: EvalProtocol,
                 ctx: ScorerContext) -> EvalResult:
        opts = dict(ctx.options or {})
        url = opts.get("judge_url") or settings.current().judge_url
        if not url:
            raise ValueError("the judge scorer needs an OpenAI-compatible endpoint: set scorer option judge_url "
                             "(command line: --judge-url http://HOST:PORT/v1) or $AUTORL_JUDGE_URL")
        model = opts.get("judge_model")
        if not model:
            raise ValueError("the judge scorer needs scorer option judge_model (the judge model's name at the endpoint)")
        if not items:
            raise ValueError("judge: no items to evaluate (is the split empty?)")
        for item in items:
            missing = [k for k in ("id", "prompt", "reference") if k not in item]
            if missing:
                raise ValueError(f"judge: item {item.get('id', '?')} lacks {', '.join(missing)}; items need id, prompt, reference")
        try:
            client = JudgeClient(url, model, api_key_env=opts.get("api_key_env"),
                                 timeout_s=float(opts.get("timeout_s", 60)), retries=int(opts.get("retries", 1)),
                                 max_tokens=int(opts.get("max_tokens", 64)))
        except JudgeError as exc:
            raise ValueError(str(exc)) from None
        cache = JudgeCache(Path(opts["cache_path"]) if opts.get("cache_path") else default_cache_path())
        try:
            return self._evaluate(policy, items, protocol, ctx, opts, client, cache)
        finally:
            cache.close()

    def _evaluate(self, policy, items, protocol, ctx, opts, client: JudgeClient, cache: JudgeCache) -> EvalResult:
        t0 = time.monotonic()
        prompts = instruction_prompts(items, protocol)
        completions = policy.generate(prompts, n=1, temperature=protocol.temperature, top_p=protocol.top_p,
                                      max_tokens=protocol.max_tokens, stop=protocol.stop)
        if len(completions) != len(items) or any(not c for c in completions):
            raise ValueError(f"judge: the policy returned {len(completions)} completion lists for {len(items)} prompts "
                             "(each needs at least one completion)")
        t_gen = time.monotonic()

        # Plan every judgment: (index, a, b, cache key, candidate_first)
        plans: list[dict] = []
        samples: list[SampleResult] = []
        for i, (item, comps) in enumerate(zip(items, completions)):
            comp = comps[0]
            cand = comp.text.strip()
            sample = SampleResult(str(item["id"]), prompt=item["prompt"], output=comp.text, expected=item["reference"],
                                  tokens=comp.tokens, data={})
            samples.append(sample)
            if not cand:
                why = context_budget.refused(comp)
                sample.correct, sample.score = False, 0.0
                sample.failure_kind = context_budget.REFUSED if why else "empty"
                sample.error = f"{why or 'empty output'}: counted as a loss without asking the judge"
                sample.data = {"outcome": "loss", "judged": False}
                continue
            candidate_first = random.Random(f"{ctx.seed}:{item['id']}").random() < 0.5
            a, b = (cand, item["reference"]) if candidate_first else (item["reference"], cand)
            plans.append({"i": i, "prompt": item["prompt"], "a": a, "b": b, "candidate_first": candidate_first,
                          "key": judgment_key(client.model, TEMPLATE_VERSION, item["prompt"], a, b)})
        anchors = self._load_anchors(opts, ctx)
        anchor_plans = []
        for an in anchors:
            for swapped in (False, True):
                a, b = (an["output_b"], an["output_a"]) if swapped else (an["output_a"], an["output_b"])
                exp = an["expected"] if an["expected"] == "tie" or not swapped else ("B" if an["expected"] == "A" else "A")
                anchor_plans.append({"id": an["id"], "prompt": an["prompt"], "a": a, "b": b, "expected": exp,
                                     "swapped": swapped})

        # Cache lookups first (main thread), then the requests that remain, concurrently.
        hits = 0
        to_send = []
        for plan in plans:
            cached = cache.get(plan["key"])
            if cached is not None:
                plan["result"] = {**cached, "cached": True}
                hits += 1
            else:
                to_send.append(plan)
        to_send_all = to_send + anchor_plans   # anchors always go to the judge: they exist to catch drift

        def ask(plan):
            try:
                reply = client.complete(judge_messages(plan["prompt"], plan["a"], plan["b"]))
            except JudgeError as exc:
                return {"error": str(exc)}
            try:
                verdict = parse_verdict(reply.text)
            except JudgeError as exc:
                return {"error": str(exc), "reply": reply.text, "prompt_tokens": reply.prompt_tokens,
                        "completion_tokens": reply.completion_tokens}
            return {"verdict": verdict, "reply": reply.text, "prompt_tokens": reply.prompt_tokens,
                    "completion_tokens": reply.completion_tokens, "cached": False}

        workers = max(1, int(opts.get("concurrency", 4)))
        with ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(ask, to_send_all))
        for plan, res in zip(to_send_all, results):
            plan["result"] = res
            if "verdict" in res and "key" in plan:
                cache.put(plan["key"], client.model, res["verdict"], res["reply"], res["prompt_tokens"],
                          res["completion_tokens"])
        t_judge = time.monotonic()

        # Per-sample outcomes
        outcomes, diffs, errors = [], [], 0
        for plan in plans:
            res = plan["result"]
            sample = samples[plan["i"]]
            order = "candidate_first" if plan["candidate_first"] else "reference_first"
            sample.data = {"order": order, "judged": True, "cached": bool(res.get("cached")),
                           "judge_reply": (res.get("reply") or "")[:500],
                           "judge_tokens": (res.get("prompt_tokens") or 0) + (res.get("completion_tokens") or 0)}
            if "error" in res:
                errors += 1
                sample.failure_kind, sample.error, sample.score, sample.correct = "runtime_error", res["error"], None, None
                sample.data["outcome"] = "error"
                continue
            v = res["verdict"]
            cand_letter = "A" if plan["candidate_first"] else "B"
            outcome = 0.5 if v == "tie" else (1.0 if v == cand_letter else 0.0)
            sample.extracted = v
            sample.score = outcome
            sample.correct = outcome == 1.0
            sample.failure_kind = "wrong_answer" if outcome == 0.0 else None
            sample.data.update({"verdict": v, "outcome": {1.0: "win", 0.5: "tie", 0.0: "loss"}[outcome]})
            outcomes.append(outcome)
            diffs.append(len(sample.output.strip()) - len(items[plan["i"]]["reference"]))
        for sample in samples:   # empty outputs are judged losses (no request)
            if sample.failure_kind == "empty":
                outcomes.append(0.0)
                diffs.append(-len(sample.expected or ""))
        if plans and errors == len(plans):
            first = next(p["result"]["error"] for p in plans)
            raise RuntimeError(f"every judgment failed ({errors} of {len(plans)}); first error: {first}")

        judged = len(outcomes)
        win_rate = 100.0 * sum(outcomes) / judged if judged else 0.0
        lc, slope = length_controlled_win_rate(outcomes, diffs)
        anchor_ok = [p for p in anchor_plans if p["result"].get("verdict") == p["expected"]]
        anchor_err = [p for p in anchor_plans if "error" in p["result"]]
        min_agree = float(opts.get("anchor_min_agreement", 0.8))
        agreement = len(anchor_ok) / len(anchor_plans) if anchor_plans else None
        sent = [p["result"] for p in to_send_all if not p["result"].get("cached")]
        in_tok = sum(r.get("prompt_tokens") or 0 for r in sent)
        out_tok = sum(r.get("completion_tokens") or 0 for r in sent)
        price_in = float(opts.get("price_per_input_token", 0.0))
        price_out = float(opts.get("price_per_output_token", 0.0))
        n_first = sum(1 for p in plans if p["candidate_first"])
        metrics = {
            "win_rate": win_rate,
            "lc_win_rate": 100.0 * lc if judged else None,
            "length_slope": slope,
            "wins": sum(1 for o in outcomes if o == 1.0), "ties": sum(1 for o in outcomes if o == 0.5),
            "losses": sum(1 for o in outcomes if o == 0.0),
            "n_items": len(items), "n_judged": judged, "n_judge_errors": errors,
            "n_empty": sum(1 for s in samples if s.failure_kind == "empty"),
            "order": {"candidate_first": n_first, "reference_first": len(plans) - n_first},
            "cache_hits": hits, "judge_requests": client.requests_sent,
            "judge_prompt_tokens": in_tok, "judge_completion_tokens": out_tok,
            "judge_cost_usd": in_tok * price_in + out_tok * price_out,
            "judge_model": client.model, "judge_url": client.url, "judge_template": TEMPLATE_VERSION,
            "anchor_agreement": agreement, "anchor_errors": len(anchor_err), "anchors_judged": len(anchor_plans),
            "anchor_min_agreement": min_agree,
            "judge_drift": (agreement is not None and agreement < min_agree),
            "anchor_disagreements": [{"id": p["id"], "swapped": p["swapped"], "expected": p["expected"],
                                      "got": p["result"].get("verdict") or p["result"].get("error")}
                                     for p in anchor_plans if p not in anchor_ok],
        }
        if metrics["judge_drift"]:
            ctx.log(f"judge drift: anchor agreement {agreement:.2f} below {min_agree:.2f}; scores may not be "
                    "comparable with earlier evaluations")
        return EvalResult(score=win_rate, metrics=metrics, samples=samples,
                          timings={"inference_s": t_gen - t0, "scoring_s": t_judge - t_gen})

    def validate_options(self, options: dict, task_dir: Path) -> list[tuple[str, str]]:
        """(problem, fix) pairs for `autorl-tui tasks validate`."""
        problems = []
        if not options.get("judge_model"):
            problems.append(("scorer_options.judge_model is not set", "name the judge model, e.g. judge_model: gpt-4o-mini"))
        if options.get("anchors"):
            try:
                self._load_anchors(options, ScorerContext(task_dir, "", task_dir, task_dir, options))
            except (ValueError, OSError) as exc:
                problems.append((f"anchors: {exc}", "fix the anchor file (one JSON object a line)"))
        else:
            problems.append(("no anchor set (scorer_options.anchors): judge drift would go unnoticed",
                             "add anchors: anchors.jsonl with a few pairs of obvious verdicts"))
        for key in ("price_per_input_token", "price_per_output_token", "timeout_s"):
            if key in options and not isinstance(options[key], (int, float)):
                problems.append((f"scorer_options.{key} is {options[key]!r}, not a number", f"write {key} as a number"))
        return problems

    @staticmethod
    def _load_anchors(opts: dict, ctx: ScorerContext) -> list[dict]:
        spec = opts.get("anchors")
        if not spec:
            return []
        path = Path(spec)
        if not path.is_absolute():
            path = Path(ctx.task_dir) / path
        if not path.exists():
            raise ValueError(f"judge: anchor file {path} does not exist (scorer option anchors)")
        anchors = []
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                an = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{n}: not a JSON line ({exc})") from None
            if (not isinstance(an, dict) or an.get("expected") not in ("A", "B", "tie")
                    or not all(k in an for k in ("prompt", "output_a", "output_b"))):
                raise ValueError(f"{path}:{n}: an anchor needs prompt, output_a, output_b and expected (A, B or tie)")
            an.setdefault("id", f"anchor-{n}")
            anchors.append(an)
        return anchors

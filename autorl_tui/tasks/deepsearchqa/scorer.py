"""Scorer `deepsearchqa`: `env_success` over the DeepSearchQA environment, plus the answer metrics
(exact match, token F1, set precision/recall for list answers, the shares of the paper's four
answer categories: share_fully_correct, share_correct_with_extraneous, share_partially_correct,
share_fully_incorrect; an unanswered episode counts in none) and how answers were graded
(`answer_scoring`: string_match, judge:<model>, or the fallback), so two runs graded differently
are told apart in every score they report."""

from __future__ import annotations

import dataclasses

from autorl_tui.grading.scorers.env_success import EnvSuccessScorer
from autorl_tui.tasks.deepsearchqa.judging import scoring_method
from autorl_tui.tasks.deepsearchqa.scoring import CATEGORIES


class DeepSearchQAScorer(EnvSuccessScorer):
    name = "deepsearchqa"
    version = "1"

    def options_for(self, opts: dict | None) -> dict:
        """The scorer options with the environment this scorer plays."""
        return {"env": "deepsearchqa", **(opts or {})}

    def validate_options(self, opts: dict, task_dir=None):
        return super().validate_options(self.options_for(opts), task_dir)

    def evaluate(self, policy, items, protocol, ctx):
        ctx = dataclasses.replace(ctx, options=self.options_for(ctx.options))
        result = super().evaluate(policy, items, protocol, ctx)
        kinds = {it.get("id"): it.get("answer_type", "single") for it in items}
        scores, by_kind = [], {"single": [], "list": []}
        for s in result.samples:
            final = next((st.get("answer_score") for st in reversed(s.data.get("trajectory") or [])
                          if st.get("answer_score")), None)
            score = final or {"em": 0.0, "f1": 0.0, "precision": 0.0, "recall": 0.0}
            scores.append(score)
            s.data["answer_score"] = final
            by_kind["list" if kinds.get(s.sample_id) == "list" else "single"].append(score)
        n = len(scores) or 1
        m = result.metrics
        m["answer_scoring"] = scoring_method(ctx.options)
        m["accuracy"] = m["success_rate"]
        m["exact_match"] = 100.0 * sum(x["em"] for x in scores) / n
        m["token_f1"] = 100.0 * sum(x["f1"] for x in scores) / n
        m["answered"] = sum(1 for s in result.samples if s.data.get("answer_score"))
        for cat in CATEGORIES:     # the DeepSearchQA paper's four answer outcomes, as shares of the episodes
            m[f"share_{cat}"] = 100.0 * sum(1 for s in result.samples
                                            if (s.data.get("answer_score") or {}).get("category") == cat) / n
        for key in ("precision", "recall"):
            lst = by_kind["list"]
            m[f"list_{key}"] = 100.0 * sum(x[key] for x in lst) / len(lst) if lst else None
        methods = {(s.data.get("answer_score") or {}).get("method") for s in result.samples} - {None}
        m["judge_fallbacks"] = sum(1 for s in result.samples
                                   if "judge error" in ((s.data.get("answer_score") or {}).get("method") or ""))
        if len(methods) > 1:
            m["answer_scoring_mixed"] = sorted(methods)
        return result

"""Answer grading for the grader: string match (scoring.py), or the OpenAI-compatible LLM judge
(grading/judge_client.py) when the card configures one, its verdicts cached on disk.

The judge is configured only by the card's scorer options (`answer_scoring: judge`, `judge_model`,
`judge_url`), never by the environment, so the card's protocol hash (which keys baselines and
caches) differs between judged and string-matched runs. `answer_scoring: judge` without a model
and URL falls back to string match, and says so in the `answer_scoring` metric of every result.
A failed judge request falls back to string match for that answer and is counted.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

from autorl_tui.grading.judge_cache import JudgeCache, judgment_key
from autorl_tui.grading.judge_client import JudgeClient, JudgeError
from autorl_tui.tasks.deepsearchqa.scoring import score_answer

TEMPLATE_VERSION = "dsqa-1"
JUDGE_PROMPT = (
    "You grade answers to a research question. Question: {question}\n"
    "Correct answer(s): {gold}\nThe answer to grade: {pred}\n"
    "{kind}Reply with one word: CORRECT or INCORRECT."
)
_VERDICT = re.compile(r"\b(INCORRECT|CORRECT)\b", re.I)


def scoring_method(options: dict) -> str:
    """What the card's options make of answer grading (recorded with every score)."""
    if options.get("answer_scoring", "string_match") != "judge":
        return "string_match"
    if options.get("judge_model") and options.get("judge_url"):
        return f"judge:{options['judge_model']}"
    return "string_match (judge not configured)"


class AnswerGrader:
    """grade(pred, item) -> the score dict of scoring.score_answer, `correct` decided by the judge
    when one is configured; adds `method`."""

    def __init__(self, options: dict):
        self.method = scoring_method(options)
        self.client = None
        self.cache = None
        self.judge_errors = 0
        self._lock = threading.Lock()
        if self.method.startswith("judge:"):
            self.client = JudgeClient(options["judge_url"], options["judge_model"],
                                      api_key_env=options.get("api_key_env"),
                                      timeout_s=float(options.get("judge_timeout_s", 60)))
            cache = options.get("cache_path") or os.environ.get("AUTORL_JUDGE_CACHE")
            self.cache = JudgeCache(Path(cache)) if cache else None
            self._memo: dict[str, bool] = {}

    def __call__(self, pred: str, item: dict) -> dict:
        score = score_answer(pred, item["answers"], item.get("answer_type", "single"))
        if self.client is None:
            return score | {"method": self.method}
        try:
            correct = self._judge(pred, item)
        except JudgeError as exc:
            with self._lock:
                self.judge_errors += 1
            return score | {"method": f"string_match (judge error: {exc})"}
        return score | {"correct": correct, "method": self.method}

    def _judge(self, pred: str, item: dict) -> bool:
        gold = "; ".join(item["answers"])
        key = judgment_key(self.client.model, TEMPLATE_VERSION, item["question"], pred, gold)
        with self._lock:
            if key in self._memo:
                return self._memo[key]
            hit = self.cache.get(key) if self.cache else None
        if hit is not None:
            return hit["verdict"] == "CORRECT"
        kind = ("The answer is a list: it is correct only if it names every correct item and nothing else.\n"
                if item.get("answer_type") == "list" else "")
        reply = self.client.complete([{"role": "user", "content": JUDGE_PROMPT.format(
            question=item["question"], gold=gold, pred=pred, kind=kind)}])
        m = _VERDICT.search(reply.text or "")
        if not m:
            raise JudgeError(f"the judge's reply has no CORRECT/INCORRECT verdict: {reply.text[:120]!r}")
        verdict = m.group(1).upper()
        with self._lock:
            self._memo[key] = verdict == "CORRECT"
            if self.cache:
                self.cache.put(key, self.client.model, verdict, reply.text, reply.prompt_tokens, reply.completion_tokens)
        return verdict == "CORRECT"

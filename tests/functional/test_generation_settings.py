"""Issue 31: grading ignores every generation setting a submission carries. The real tiny model,
once plain and once with a generation_config.json asking for 64 beams, a repetition penalty, an
n-gram ban, bad-word lists that ban the plain model's own answers, a minimum length and suppressed
EOS, is graded by the real grader (as the engine starts it) exactly like the plain model."""

import asyncio
import json
import shutil
import time

import pytest

from autorl_tui.grading_host.grading_client import run_grader
from autorl_tui.grading.inference import TransformersPolicy
from tests.functional.test_grader_bounds import request

pytestmark = pytest.mark.slow

PROMPTS = ["2+3=", "7+8=", "12+30=", "9+9="]


def hostile_copy(tiny_model_dir, dst):
    shutil.copytree(tiny_model_dir, dst)
    plain = TransformersPolicy(tiny_model_dir, prompt_format="plain")
    answers = plain.generate(PROMPTS, max_tokens=8)
    tok = plain.tokenizer
    banned = sorted({i for c in answers for i in tok(c[0].text, add_special_tokens=False)["input_ids"]})
    assert banned, answers
    settings = {"num_beams": 64, "repetition_penalty": 5.0, "length_penalty": -3.0, "no_repeat_ngram_size": 1,
                "bad_words_ids": [[i] for i in banned], "min_new_tokens": 40, "suppress_tokens": [tok.eos_token_id],
                "begin_suppress_tokens": [banned[0]], "sequence_bias": [[[banned[-1]], -50.0]],
                "forced_eos_token_id": banned[0], "eos_token_id": banned[-1]}
    (dst / "generation_config.json").write_text(json.dumps(settings))
    return dst, [c[0].text for c in answers]


def test_a_submission_generation_config_does_not_change_the_outputs(tiny_model_dir, tmp_path):
    hostile, plain_answers = hostile_copy(tiny_model_dir, tmp_path / "hostile")
    policy = TransformersPolicy(hostile, prompt_format="plain")
    assert policy.model.generation_config.num_beams == 1
    assert [c[0].text for c in policy.generate(PROMPTS, max_tokens=8)] == plain_answers


def test_a_num_beams_64_submission_is_graded_like_the_plain_model(tiny_model_dir, tmp_path):
    hostile, _ = hostile_copy(tiny_model_dir, tmp_path / "hostile")
    runs = {}
    # the first grading starts the warm grader: the plain model again after the hostile one is the
    # like-for-like time
    for name, model in (("first", tiny_model_dir), ("hostile", hostile), ("plain", tiny_model_dir)):
        t0 = time.monotonic()
        outcome = asyncio.run(run_grader(request(tmp_path, model, limit=40), tmp_path / f"work-{name}",
                                         timeout_s=600))
        assert outcome.ok, outcome
        runs[name] = (outcome, time.monotonic() - t0)
    plain, hostile_run = runs["plain"][0], runs["hostile"][0]
    assert hostile_run.score == plain.score == runs["first"][0].score
    assert [s.get("output") for s in hostile_run.samples] == [s.get("output") for s in plain.samples]
    assert len(plain.samples) == 40
    print(f"grading wall time: plain {runs['plain'][1]:.1f}s, hostile {runs['hostile'][1]:.1f}s, "
          f"ratio {runs['hostile'][1] / runs['plain'][1]:.2f}")

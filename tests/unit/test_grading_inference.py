"""The transformers backend on the real tiny model."""

import pytest

from autorl_tui.grading.inference import InvalidModel, TransformersPolicy, check_model_dir, load_policy
from tests.support.context_prompts import prompt_of

PROMPTS = ["Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?",
           "There are 12 books on a shelf. Mia takes 5 books away. How many books are on the shelf now?",
           "Sam had 9 coins and sold 2 of them. How many coins does Sam have now?"]


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    return TransformersPolicy(tiny_model_dir, threads=1, seed=0, batch_size=8)


@pytest.mark.subprocess
def test_greedy_is_deterministic_and_independent_of_batching(policy, tiny_model_dir):
    a = policy.generate(PROMPTS, max_tokens=24)
    b = policy.generate(PROMPTS, max_tokens=24)
    single = TransformersPolicy(tiny_model_dir, threads=1, batch_size=1).generate(PROMPTS, max_tokens=24)
    assert [x[0].text for x in a] == [x[0].text for x in b] == [x[0].text for x in single]
    assert all("####" in x[0].text and x[0].finish_reason == "stop" for x in a)


@pytest.mark.subprocess
def test_n_samples_and_max_tokens(policy):
    out = policy.generate(PROMPTS[:2], n=3, temperature=1.0, max_tokens=24)
    assert [len(x) for x in out] == [3, 3]
    cut = policy.generate(PROMPTS[:1], max_tokens=2)[0][0]
    assert cut.tokens == 2 and cut.finish_reason == "length"
    greedy = policy.generate(PROMPTS[:1], n=2, max_tokens=24)[0]
    assert len(greedy) == 2 and greedy[0].text == greedy[1].text


@pytest.mark.subprocess
def test_stop_strings_cut_the_text(policy):
    full = policy.generate(PROMPTS[:1], max_tokens=24)[0][0].text
    stopped = policy.generate(PROMPTS[:1], max_tokens=24, stop=["####"])[0][0]
    assert "####" in full and stopped.text == full.split("####")[0] and stopped.finish_reason == "stop"


@pytest.mark.subprocess
def test_invalid_model_folders_are_explained(tmp_path, tiny_model_dir):
    with pytest.raises(InvalidModel, match="does not exist"):
        check_model_dir(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidModel, match="no config.json"):
        check_model_dir(tmp_path / "empty")
    lora = tmp_path / "lora"
    lora.mkdir()
    (lora / "adapter_config.json").write_text("{}")
    (lora / "adapter_model.safetensors").write_bytes(b"x")
    with pytest.raises(InvalidModel, match="merge"):
        check_model_dir(lora)
    noweights = tmp_path / "noweights"
    noweights.mkdir()
    (noweights / "config.json").write_text((tiny_model_dir / "config.json").read_text())
    with pytest.raises(InvalidModel, match="no weights"):
        check_model_dir(noweights)
    with pytest.raises(ValueError, match="unknown inference backend"):
        load_policy("onnx", tiny_model_dir)


@pytest.fixture(scope="module")
def plain(tiny_model_dir):
    return TransformersPolicy(tiny_model_dir, threads=1, seed=0, batch_size=8, prompt_format="plain")


@pytest.mark.subprocess
def test_a_prompts_budget_and_completion_do_not_depend_on_its_batch(plain, tiny_model_dir):
    """The same prompt alone, batched with one that nearly fills the context, and with batch size 1:
    the same budget (max_tokens capped by its own length only) and the same completion. Before,
    the batch's padded width set every row's budget: 10 new tokens here."""
    limit = plain.max_positions
    short = "Question: Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?\nAnswer:"
    long = prompt_of(plain.tokenizer, limit - 10)
    alone = plain.generate([short], max_tokens=40)[0][0]
    batched = plain.generate([long, short], max_tokens=40)
    one_by_one = TransformersPolicy(tiny_model_dir, threads=1, batch_size=1, prompt_format="plain").generate(
        [long, short], max_tokens=40)
    assert alone.budget == 40 and alone.tokens > 10          # the old batch budget would have cut it at 10
    for got in (batched[1][0], one_by_one[1][0]):
        assert (got.text, got.tokens, got.finish_reason, got.budget) == \
            (alone.text, alone.tokens, alone.finish_reason, alone.budget)
    assert batched[0][0].budget == one_by_one[0][0].budget == 10 and batched[0][0].tokens <= 10
    assert batched[0][0].text == one_by_one[0][0].text


@pytest.mark.subprocess
def test_a_prompt_that_fills_the_context_is_refused_with_its_reason(plain):
    """vLLM's rules: prompt >= max_model_len is refused (the sample gets the reason, no output);
    prompt + output stops at the context (finish_reason length); the others are untouched."""
    limit = plain.max_positions
    short = "Question: Sam had 9 coins and sold 2 of them. How many coins does Sam have now?\nAnswer:"
    alone = plain.generate([short], max_tokens=24)[0][0]
    out = plain.generate([prompt_of(plain.tokenizer, limit + 40), short, prompt_of(plain.tokenizer, limit),
                          prompt_of(plain.tokenizer, limit - 1)], n=2, max_tokens=24)
    for refused, length in ((out[0], limit + 40), (out[2], limit)):
        assert len(refused) == 2 and refused[0].finish_reason == "prompt_too_long" and refused[0].text == ""
        assert f"the prompt has {length} tokens and the model's context holds {limit}" in refused[0].error
    assert (out[1][0].text, out[1][0].tokens) == (alone.text, alone.tokens)
    last = out[3][0]
    assert last.budget == 1 and last.tokens <= 1 and last.error is None
    assert last.finish_reason == ("length" if last.tokens == 1 else "stop")


@pytest.mark.subprocess
def test_greedy_rows_end_at_their_stop_with_the_text_the_cut_gives(policy, tiny_model_dir):
    """Generation stops at a stop string (as vLLM does) and keeps exactly the text that cutting a
    full-budget generation gives, row by row in one batch and alone."""
    full = [x[0] for x in policy.generate(PROMPTS, max_tokens=24)]
    single = TransformersPolicy(tiny_model_dir, threads=1, batch_size=1)
    saved = 0
    for stop in (["####"], [" "], ["\n"], ["1", "2", "3", "4", "5", "6", "7", "8", "9"], ["no such text"]):
        batched = [x[0] for x in policy.generate(PROMPTS, max_tokens=24, stop=stop)]
        alone = [x[0] for x in single.generate(PROMPTS, max_tokens=24, stop=stop)]
        for f, b, a in zip(full, batched, alone):
            cut = min((i for i in (f.text.find(s) for s in stop) if i >= 0), default=-1)
            assert b.text == a.text == (f.text[:cut] if cut >= 0 else f.text), (stop, f.text, b.text)
            assert b.tokens == a.tokens <= f.tokens
            assert b.finish_reason == ("stop" if cut >= 0 else f.finish_reason)
            saved += f.tokens - b.tokens
    assert saved > 0          # some rows stopped before the full budget's end

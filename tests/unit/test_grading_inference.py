"""The transformers backend on the real tiny model."""

import pytest

from autorl_tui.grading.inference import InvalidModel, TransformersPolicy, check_model_dir, load_policy

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

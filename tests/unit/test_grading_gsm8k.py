"""The gsm8k card on a small file in the official GSM8K format (test data written here)."""

import json

import pytest

from autorl_tui.catalog.tasks import DataUnavailable, find_task, materialize, read_items, task_search_path
from autorl_tui.exitcodes import UsageError


def write_gsm8k(folder, n_train=510, n_test=7):
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "train.jsonl", "w") as fh:
        for i in range(n_train):
            fh.write(json.dumps({"question": f"Ann has {i} pens and buys 1,000 more. How many now?",
                                 "answer": f"She has {i} + 1000 = <<{i}+1000={i + 1000}>>{i + 1000} pens.\n"
                                           f"#### {i + 1000:,}"}) + "\n")
    with open(folder / "test.jsonl", "w") as fh:
        for i in range(n_test):
            fh.write(json.dumps({"question": f"What is {i} times 2?", "answer": f"{i} * 2 = {2 * i}\n#### {2 * i}"})
                     + "\n")


def test_local_gsm8k_is_normalized_and_dev_carved_from_train(tmp_path, monkeypatch):
    """The `zero-shot` protocol (this project's earlier one): our item shape, dev carved out of train."""
    write_gsm8k(tmp_path / "gsm8k")
    monkeypatch.setenv("GSM8K_PATH", str(tmp_path / "gsm8k"))
    card = find_task("gsm8k", task_search_path(), protocol="zero-shot")
    cache = tmp_path / "cache"
    train = read_items(materialize(card, "train", cache))
    dev = read_items(materialize(card, "dev", cache))
    test = read_items(materialize(card, "test", cache))
    assert (len(train), len(dev), len(test)) == (10, 500, 7)
    assert train[0] == {"id": "gsm8k-train-00000", "prompt": "Ann has 0 pens and buys 1,000 more. How many now?",
                        "answer": "1000", "solution": "She has 0 + 1000 = <<0+1000=1000>>1000 pens.\n#### 1,000"}
    assert dev[0]["prompt"].startswith("Ann has 10 pens")          # the last 500 of train
    assert not {x["prompt"] for x in train} & {x["prompt"] for x in dev}
    assert test[3]["answer"] == "6"


def test_autorl_bench_protocol_keeps_gsm8k_rows_and_all_of_train(tmp_path, monkeypatch):
    """Under `autorl-bench` (the default) the agent's train split is every official training row in
    GSM8K's own {question, answer} shape, as AutoRL-Bench hands it to agents; dev overlaps it."""
    write_gsm8k(tmp_path / "gsm8k")
    monkeypatch.setenv("GSM8K_PATH", str(tmp_path / "gsm8k"))
    card = find_task("gsm8k", task_search_path())
    assert card.protocol_name == "autorl-bench"
    cache = tmp_path / "cache"
    train = read_items(materialize(card, "train", cache))
    dev = read_items(materialize(card, "dev", cache))
    test = read_items(materialize(card, "test", cache))
    assert (len(train), len(dev), len(test)) == (510, 500, 7)
    assert train[0] == {"question": "Ann has 0 pens and buys 1,000 more. How many now?",
                        "answer": "She has 0 + 1000 = <<0+1000=1000>>1000 pens.\n#### 1,000"}
    assert test[3] == {"id": "gsm8k-test-00003", "prompt": "What is 3 times 2?", "question": "What is 3 times 2?",
                       "answer": "3 * 2 = 6\n#### 6"}
    prompt = card.protocol.build_prompt(test[3])
    assert [m["role"] for m in prompt] == ["user", "assistant"] * 4 + ["user"]
    assert prompt[-1]["content"] == "Question: What is 3 times 2?\nLet's think step by step\nAnswer:"
    assert prompt[1]["content"].endswith("The answer is 4\n")
    assert (card.protocol.max_tokens, card.protocol.stop) == (512, ["Question:"])


def test_missing_gsm8k_says_where_to_put_the_files(tmp_path, monkeypatch):
    monkeypatch.setenv("GSM8K_PATH", str(tmp_path / "nowhere"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    card = find_task("gsm8k", task_search_path())
    card.data["default"] = str(tmp_path / "default-place")
    with pytest.raises(DataUnavailable) as err:
        materialize(card, "test", tmp_path / "cache")
    msg = str(err.value)
    assert "train.jsonl" in msg and "test.jsonl" in msg and str(tmp_path / "default-place") in msg
    assert "GSM8K_PATH" in msg and "####" in msg and "autorl-tui data get gsm8k" in msg


def test_wrong_format_is_explained(tmp_path, monkeypatch):
    folder = tmp_path / "gsm8k"
    write_gsm8k(folder)
    (folder / "test.jsonl").write_text(json.dumps({"question": "q", "answer": "no marker here"}) + "\n")
    monkeypatch.setenv("GSM8K_PATH", str(folder))
    card = find_task("gsm8k", task_search_path())
    with pytest.raises(UsageError, match="does not end in '#### N'"):
        materialize(card, "test", tmp_path / "cache")


def test_another_gsm8k_folder_is_another_dataset_not_the_cached_one(tmp_path, monkeypatch):
    """The data cache (and the cached baselines) are keyed by where the files come from: pointing
    GSM8K_PATH elsewhere, or changing the files, materializes the new data, not the old cache."""
    write_gsm8k(tmp_path / "a", n_test=7)
    write_gsm8k(tmp_path / "b", n_test=3)
    cache = tmp_path / "cache"
    monkeypatch.setenv("GSM8K_PATH", str(tmp_path / "a"))
    card = find_task("gsm8k", task_search_path())
    first = card.protocol_hash()
    assert len(read_items(materialize(card, "test", cache))) == 7
    assert card.protocol_hash() == first                       # stable while nothing changes
    monkeypatch.setenv("GSM8K_PATH", str(tmp_path / "b"))
    assert card.protocol_hash() != first
    assert len(read_items(materialize(card, "test", cache))) == 3
    write_gsm8k(tmp_path / "b", n_test=5)                      # the same folder, new files
    assert len(read_items(materialize(card, "test", cache))) == 5

"""Contamination evidence on the harness side: a workspace whose code revisions train on the
held-out split's items (verbatim and lightly reworded) is flagged with the matching items; one that
trains on the train split only is not. The revisions are recorded in a real store (blobs and
manifests as the revision tracker writes them) and the splits are real generated arith items."""

from __future__ import annotations

import json
import re
import time

import pytest

from autorl_tui.engine import contamination, trust_sweep
from autorl_tui.store.db import Store
from autorl_tui.tasks.arith.generator import generate

PARAMS = {"max_n": 1000}        # numbers up to 1000: the generated held-out items are distinct from train


@pytest.fixture()
def splits(tmp_path):
    paths = {}
    for split, n, seed in (("train", 400, 42), ("test", 60, 1234)):
        items = generate(split, PARAMS, n=n, seed=seed)
        paths[split] = tmp_path / f"{split}.jsonl"
        paths[split].write_text("".join(json.dumps(x) + "\n" for x in items))
    return {k: str(v) for k, v in paths.items()}


def _items(path):
    return [json.loads(line) for line in open(path)]


def _reword(item: dict) -> dict:
    """A light rewording: one phrase changed, the numbers and the answer kept."""
    prompt = re.sub(r"^(\w+) ", r"Little \1 ", item["prompt"])
    prompt = prompt.replace("How many", "Tell me how many")
    return {**item, "prompt": prompt}


def _sft_file(items: list[dict]) -> bytes:
    return "".join(json.dumps({"messages": [{"role": "user", "content": x["prompt"]},
                                            {"role": "assistant", "content": x["solution"]}]}) + "\n"
                   for x in items).encode()


def _record_revision(store: Store, run_id: str, files: dict[str, bytes]) -> None:
    manifest = {path: store.put_blob(data) for path, data in files.items()}
    store.add_revision(run_id, ts=time.time(), reason="change", manifest=manifest,
                       total_bytes=sum(map(len, files.values())), skipped=[])


def test_a_workspace_training_on_held_out_items_is_flagged_with_them(tmp_path, splits):
    store = Store(tmp_path / "store.db")
    test, train = _items(splits["test"]), _items(splits["train"])
    verbatim, reworded = test[:6], [_reword(x) for x in test[10:16]]
    _record_revision(store, "r1", {"train.py": b"print('sft')\n"})
    _record_revision(store, "r1", {"train.py": b"print('sft')\n",
                                   "sft_data/extra.jsonl": _sft_file(train[:100] + verbatim + reworded)})
    workspace = tmp_path / "ws"
    (workspace / "output").mkdir(parents=True)
    result = trust_sweep.contamination_evidence(store, "r1", splits, workspace,
                                                contamination.ContaminationProtocol())
    found = {m["id"] for m in result["matched"]}
    assert found == {x["id"] for x in verbatim + test[10:16]}
    assert result["flagged"] and result["n_matched"] == 12
    assert all(m["source"] == "code/sft_data/extra.jsonl (revision 2)" for m in result["matched"])
    assert result["protocol"]["tolerance"] == 3


def test_a_workspace_training_on_train_only_is_not_flagged(tmp_path, splits):
    store = Store(tmp_path / "store.db")
    train = _items(splits["train"])
    _record_revision(store, "r2", {"train.py": b"print('sft')\n", "sft_data/train.jsonl": _sft_file(train)})
    workspace = tmp_path / "ws"
    (workspace / "output" / "v1").mkdir(parents=True)
    (workspace / "output" / "v1" / "train_prompts.txt").write_text("\n".join(x["prompt"] for x in train))
    result = trust_sweep.contamination_evidence(store, "r2", splits, workspace, contamination.ContaminationProtocol())
    assert result["n_matched"] == 0 and not result["flagged"]
    assert result["n_held_out"] == 60 and result["n_sources"] >= 2


def test_held_out_items_in_a_submitted_folder_or_left_in_the_workspace_are_found(tmp_path, splits):
    test = _items(splits["test"])
    store = Store(tmp_path / "store.db")
    workspace = tmp_path / "ws"
    (workspace / "output" / "v1").mkdir(parents=True)
    (workspace / "output" / "v1" / "model.safetensors").write_bytes(_sft_file(test))   # weights are not read
    (workspace / "output" / "v1" / "data.jsonl").write_bytes(_sft_file(test[:2]))
    (workspace / "data").mkdir()
    (workspace / "data" / "copy.jsonl").write_bytes(_sft_file(test[2:4]))                # the harness's own
    result = trust_sweep.contamination_evidence(store, "r3", splits, workspace, contamination.ContaminationProtocol())
    assert {m["id"] for m in result["matched"]} == {test[0]["id"], test[1]["id"]}
    assert not result["flagged"]             # 2 items: within the tolerance of 3
    assert result["matched"][0]["source"] == "workspace: output/v1/data.jsonl"


def test_held_out_items_the_train_split_also_holds_are_set_aside():
    held_out = [{"id": "t1", "prompt": "Ann has 3 apples and buys 4 more apples at the shop today.", "answer": "7"}]
    train = [dict(held_out[0], id="x1")]
    sources = {"code/a.txt": "Ann has 3 apples and buys 4 more apples at the shop today. #### 7"}
    result = contamination.check(held_out, sources, train)
    assert result["n_matched"] == 0 and result["set_aside_in_train"] == ["t1"]
    wrong = contamination.check(held_out, {"code/a.txt": sources["code/a.txt"].replace("7", "9")})
    assert wrong["n_matched"] == 0           # the question without its answer is not a match


def test_on_a_templated_task_leaked_items_are_found_and_the_templates_alone_are_not(tmp_path):
    """arith-small's items (numbers up to 10): train and held-out share every template phrase; only
    the numbers tell items apart."""
    train = generate("train", {"max_n": 10}, n=1000, seed=42)
    test = generate("test", {"max_n": 10}, n=40, seed=1234)
    clean = contamination.check(test, {"code/sft.jsonl": _sft_file(train).decode()}, train)
    assert clean["n_matched"] == 0
    # the train split itself holds some held-out problems (a name swapped, the same numbers): set aside
    given = set(clean["set_aside_in_train"])
    assert 0 < len(given) < 30
    fresh = [x for x in test if x["id"] not in given][:6]
    leaked = contamination.check(test, {"code/sft.jsonl": _sft_file(train + fresh).decode()}, train)
    assert {m["id"] for m in leaked["matched"]} == {x["id"] for x in fresh} and leaked["flagged"]

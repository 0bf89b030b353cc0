"""Named evaluation protocols of a task card (catalog/protocol.py): choosing one, what it
overrides, its name in the hash and the card's dict, and the plan's `protocol:`."""

import pytest
import yaml

from autorl_tui.catalog.plans import parse_plan
from autorl_tui.catalog.tasks import find_task, load_task_card, task_search_path
from autorl_tui.exitcodes import UsageError

CARD = {
    "id": "two-ways", "level": 1, "scorer": "exact_match", "primary_metric": "accuracy",
    "default_protocol": "bench",
    "protocols": {
        "bench": {"about": "as the benchmark does it", "max_tokens": 512, "stop": ["Question:"],
                  "prompt_template": "Q: {prompt}\nA:", "shots": [{"role": "user", "content": "Q: 1+1\nA:"},
                                                                   {"role": "assistant", "content": "2"}],
                  "data": {"splits": {"train": {"n": 5, "seed": 1}, "dev": {"n": 3, "seed": 2},
                                      "test": {"n": 4, "seed": 3}}},
                  "scorer_options": {"extraction": "opencompass-gsm8k"}},
        "ours": {"max_tokens": 64},
    },
    "data": {"provider": "generator", "generator": "arith", "params": {"max_operand": 9},
             "splits": {"train": {"n": 50, "seed": 1}, "dev": {"n": 10, "seed": 2}, "test": {"n": 10, "seed": 3}}},
    "scorer_options": {"keep": 1},
}


def write_card(tmp_path, card=CARD):
    folder = tmp_path / card["id"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.yaml").write_text(yaml.safe_dump(card))
    (folder / "description.md").write_text("a task\n")
    return folder


def test_the_default_protocol_and_its_overrides(tmp_path):
    card = load_task_card(write_card(tmp_path))
    assert (card.protocol_name, card.protocol_names) == ("bench", ["bench", "ours"])
    assert card.protocol.max_tokens == 512 and card.protocol_about == "as the benchmark does it"
    assert card.data["splits"]["test"] == {"n": 4, "seed": 3}              # the protocol's splits
    assert card.data["generator"] == "arith"                                # the rest of the card's data
    assert card.scorer_options == {"keep": 1, "extraction": "opencompass-gsm8k"}
    assert card.protocol.build_prompt({"prompt": "2+2"}) == [
        {"role": "user", "content": "Q: 1+1\nA:"}, {"role": "assistant", "content": "2"},
        {"role": "user", "content": "Q: 2+2\nA:"}]
    d = card.to_dict()
    assert d["protocol_name"] == "bench" and d["protocol"]["shots"][1]["content"] == "2"


def test_another_protocol_by_name_is_another_hash(tmp_path):
    folder = write_card(tmp_path)
    bench, ours = load_task_card(folder), load_task_card(folder, "ours")
    assert ours.protocol_name == "ours" and ours.protocol.max_tokens == 64
    assert ours.data["splits"]["test"] == {"n": 10, "seed": 3} and ours.scorer_options == {"keep": 1}
    assert "shots" not in ours.protocol.to_dict()        # unused new fields leave old hashes alone
    assert bench.protocol_hash() != ours.protocol_hash()
    # The same fields under another name are another protocol.
    renamed = dict(CARD, protocols={"bench": CARD["protocols"]["bench"], "other": CARD["protocols"]["bench"]})
    other = load_task_card(write_card(tmp_path / "b", renamed), "other")
    assert other.protocol.to_dict() == bench.protocol.to_dict() and other.protocol_hash() != bench.protocol_hash()


def test_an_unknown_protocol_names_the_known_ones(tmp_path):
    folder = write_card(tmp_path)
    with pytest.raises(UsageError, match=r"no protocol 'paper'; this task's protocols: bench, ours \(default bench\)"):
        load_task_card(folder, "paper")
    with pytest.raises(UsageError, match="default_protocol 'x' is not one of the protocols"):
        load_task_card(write_card(tmp_path / "c", dict(CARD, default_protocol="x")))
    with pytest.raises(UsageError, match="either `protocol`"):
        load_task_card(write_card(tmp_path / "d", dict(CARD, protocol={"max_tokens": 3})))


def test_single_protocol_cards_are_named_default_and_keep_their_hash(tmp_path):
    card = find_task("arith", task_search_path())
    assert card.protocol_name == "default" and card.protocol_names == ["default"]
    assert card.protocol_hash() == find_task("arith", task_search_path(), protocol="default").protocol_hash()
    with pytest.raises(UsageError, match="no protocol 'autorl-bench'"):
        find_task("arith", task_search_path(), protocol="autorl-bench")


def test_a_plan_chooses_protocols_per_task_or_for_all():
    plan = parse_plan(yaml.safe_dump({"tasks": ["arith", {"id": "gsm8k", "protocol": "zero-shot"}],
                                      "agents": ["a"], "budget": "1m"}))
    assert [(r.task, r.protocol) for r in plan.runs] == [("arith", None), ("gsm8k", "zero-shot")]
    plan = parse_plan(yaml.safe_dump({"tasks": ["gsm8k", {"id": "humaneval", "protocol": "default"}],
                                      "protocol": "autorl-bench", "agents": ["a"], "budget": "1m"}))
    assert [(r.task, r.protocol) for r in plan.runs] == [("gsm8k", "autorl-bench"), ("humaneval", "default")]
    with pytest.raises(UsageError, match="a task entry must be a task id or"):
        parse_plan(yaml.safe_dump({"tasks": [{"task": "gsm8k"}], "agents": ["a"], "budget": "1m"}))

"""RunSpec: the one typed run from plan validation to the report. It round-trips through its
stored JSON exactly, reads the specs older versions (and imports) stored, and is frozen."""

import dataclasses
import json

import pytest

from autorl_tui.catalog.agents import agent_search_path, find_agent
from autorl_tui.catalog.tasks import find_task, task_search_path
from autorl_tui.store.isolation import recorded_exposures, recorded_isolation
from autorl_tui.store.records import RunRecord
from autorl_tui.store.run_spec import RunSpec


def validated_spec(**options) -> RunSpec:
    """What Engine._validate builds for arith with the baseline-copy agent (real card, real agent spec)."""
    card = find_task("arith", task_search_path())
    agent = find_agent("baseline-copy", agent_search_path())
    task = card.to_dict()
    return RunSpec(task=task, agent=agent.to_dict(), model="tiny", model_name="tiny", seed=3, executor="local",
                   driver=None, options=options, protocol=card.protocol.to_dict(),
                   protocol_name=card.protocol_name, level=card.level, data_origin=task["data_origin"],
                   isolation="bwrap")


def test_a_validated_spec_round_trips_through_its_json():
    spec = validated_spec(limits={"cpus": 2}, driver_url="http://127.0.0.1:8000/v1", log_cap={"file_bytes": 4096})
    again = RunSpec.from_json(spec.to_json())
    assert again == spec
    assert again.to_dict() == json.loads(spec.to_json())
    # the stored shape is the one every version wrote: the same keys, in the same order
    assert list(spec.to_dict()) == ["task", "agent", "model", "model_name", "seed", "executor", "driver", "options",
                                    "protocol", "protocol_name", "level", "data_origin", "isolation"]
    assert again.task["id"] == "arith" and again.agent["name"] == "baseline-copy"
    assert again.option("driver_url") == "http://127.0.0.1:8000/v1"
    assert again.option("limits", {}) == {"cpus": 2} and again.option("image") is None


def test_a_changed_field_is_a_different_spec():
    spec = validated_spec()
    assert dataclasses.replace(spec, seed=4) != spec
    assert RunSpec.from_json(dataclasses.replace(spec, isolation="none").to_json()) != spec


def test_the_spec_is_frozen():
    spec = validated_spec()
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.seed = 5      # type: ignore[misc]
    assert not hasattr(spec, "__dict__")      # slots: no stray attributes either


def test_an_old_spec_reads_with_defaults_and_writes_back_as_it_was():
    """A spec stored before `isolation`, `data_origin`, `protocol_name` and `executor` were recorded."""
    old = {"task": {"id": "arith", "dir": "/x/arith"}, "agent": {"name": "a", "network": "host"}, "model": "tiny",
           "model_name": "tiny", "seed": 0, "driver": None, "options": {"cluster": {"auth": "none"}},
           "protocol": {"temperature": 0.0}, "level": 1}
    spec = RunSpec.from_dict(old)
    assert spec.isolation is None and spec.isolated          # unrecorded: isolated, as the supervisor assumed
    assert spec.executor_name == "local" and spec.protocol_name is None and spec.data_origin is None
    assert spec.to_dict() == old                               # no key added, none lost
    assert json.loads(spec.to_json()) == old
    assert recorded_isolation(old, "docker") == "docker" and recorded_isolation(old, "local") == "unrecorded"
    assert recorded_exposures(old) == ["network: host", "ray cluster without token authentication"]


def test_an_early_model_shape_and_unknown_keys_are_kept():
    old = {"task": {"id": "t"}, "model": {"name": "m", "path": "/models/m"}, "splits": ["train"], "future_key": 1}
    spec = RunSpec.from_dict(old)
    assert spec.model_path == "/models/m"
    assert spec.extra == {"splits": ["train"], "future_key": 1}
    assert spec.to_dict() == old


def test_an_imported_spec_round_trips():
    imported = {"imported": {"from": "autorl-bench", "success": True}, "agent": {"name": "x"}, "task": {"id": "gsm8k"},
                "model_name": "qwen", "executor": "imported"}
    spec = RunSpec.from_dict(imported)
    assert spec.imported == {"from": "autorl-bench", "success": True} and spec.executor_name == "imported"
    assert spec.to_dict() == imported
    assert RunSpec.from_json(spec.to_json()) == spec


@pytest.mark.parametrize("stored", [None, "", "not json", [1, 2], {"task": "not an object"}])
def test_a_missing_or_broken_spec_is_an_empty_one(stored):
    spec = RunSpec.from_dict(stored)
    assert spec.task == {} and spec.options == {} and spec.isolated


def test_a_run_record_carries_a_run_spec():
    spec = validated_spec(image="python:3.12")
    row = {f.name: None for f in dataclasses.fields(RunRecord)} | {"spec": spec.to_json()}
    record = RunRecord.from_row(row)
    assert isinstance(record.spec, RunSpec) and record.spec == spec
    assert record.to_dict()["spec"] == spec.to_dict()        # --json output keeps the stored shape

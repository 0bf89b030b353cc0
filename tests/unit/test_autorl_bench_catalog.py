"""AutoRL-Bench agent folders as agent specs, its task ids, and the API's view of the ledger."""

from pathlib import Path

import pytest

from autorl_tui.catalog.agents import find_agent, list_agents, passthrough_env
from autorl_tui.catalog.autorl_bench_agents import load_agent_folder
from autorl_tui.catalog.plans import load_plan
from autorl_tui.catalog.tasks import find_task
from autorl_tui.engine import autorl_bench_api as abapi
from autorl_tui.exitcodes import UsageError

REPO = Path(__file__).resolve().parents[2]


def _folder(root: Path, name: str, config: str | None, start: str = "start.sh") -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / start).write_text("#!/bin/bash\necho hi\n")
    if config is not None:
        (d / "config.yaml").write_text(config)
    return d


def test_folder_becomes_a_spec_with_its_env_vars_under_the_harness_values(tmp_path):
    d = _folder(tmp_path, "claude", 'name: "Claude CLI Agent"\nenv_vars:\n  CLAUDE_MODEL: "m1"\n  TASK: x\n')
    spec = load_agent_folder(d)
    assert spec.name == "claude" and spec.grading_api == "autorl-bench" and spec.agent_dir == d.resolve()
    assert spec.output_format == "claude_stream_json" and spec.network == "bridge"
    assert "ANTHROPIC_API_KEY" in spec.env and "TASK" not in spec.env_values
    assert spec.command[-1] == "{agent_dir}/start.sh"
    assert passthrough_env(spec, {}) == {"CLAUDE_MODEL": "m1"}
    assert passthrough_env(spec, {"CLAUDE_MODEL": "m2", "ANTHROPIC_API_KEY": "k", "OTHER": "no"}) == \
        {"CLAUDE_MODEL": "m2", "ANTHROPIC_API_KEY": "k"}


def test_plain_folder_is_text_without_network_and_found_in_search_paths(tmp_path):
    _folder(tmp_path, "example_agent", 'name: "Example Agent"\nstart: run.sh\n', start="run.sh")
    (tmp_path / "other.yaml").write_text("name: other\ncommand: echo\n")
    agents = list_agents([tmp_path])
    assert set(agents) == {"example_agent", "other"}
    spec = agents["example_agent"]
    assert spec.output_format == "text" and spec.network == "none" and spec.command[-1] == "{agent_dir}/run.sh"
    assert find_agent(str(tmp_path / "example_agent"), []).name == "example_agent"   # by path
    assert find_agent("example_agent", [tmp_path / "example_agent"]).name == "example_agent"   # the folder itself


@pytest.mark.parametrize("config, message", [
    ("start: missing.sh\n", "not a file in the folder"),
    ("start: ../../etc/passwd\n", "not a file in the folder"),
    ("env_vars: [A, B]\n", "`env_vars` must be a mapping"),
    ("stack: cursor\n", "stack 'cursor' unknown"),
    ("[unclosed\n", "not valid YAML"),
])
def test_bad_folders_say_what_to_fix(tmp_path, config, message):
    d = _folder(tmp_path, "bad", config)
    with pytest.raises(UsageError, match=message):
        load_agent_folder(d)


def test_its_task_ids_map_to_our_cards():
    path = [REPO / "autorl_tui" / "tasks"]
    assert find_task("alpacaeval", path).id == "alpacaeval"      # AlpacaEval 2.0 itself, not the stand-in
    assert find_task("gsm8k", path).id == "gsm8k"
    assert find_task("webshop", path).id == "webshop"
    assert find_task("deepsearchqa", path).id == "deepsearchqa"


def test_plan_agent_path_relative_to_the_plan(tmp_path, monkeypatch):
    _folder(tmp_path / "agents", "claude", "name: c\n")
    (tmp_path / "plan.yaml").write_text("tasks: [arith]\nagents: [agents/claude]\nbudget: 1m\n")
    monkeypatch.chdir("/")
    assert load_plan(tmp_path / "plan.yaml").runs[0].agent == str((tmp_path / "agents" / "claude").resolve())


def test_gpu_choice_and_answers_as_of_a_submission():
    assert abapi.choose_gpus(None, ["0", "1"]) == ["0", "1"]
    assert abapi.choose_gpus(1, ["0", "1"]) == ["1"] and abapi.choose_gpus("1, 0", ["0", "1"]) == ["1", "0"]
    for bad, code in (("2", "bad_gpu"), ("", "bad_gpu"), (True, "bad_request"), ([0], "bad_request")):
        with pytest.raises(abapi.GpuRefused) as info:
            abapi.choose_gpus(bad, ["0", "1"])
        assert info.value.code == code and info.value.available == ["0", "1"]
    rows = [{"seq": 1, "path": "output/a", "status": "scored", "score": 50.0, "received_at": 100.0, "graded_at": 110.0},
            {"seq": 2, "path": "output/b", "status": "error", "score": None, "error": "bad", "received_at": 120.0,
             "graded_at": 121.0},
            {"seq": 4, "path": "output/c", "status": "scored", "score": 70.0, "received_at": 130.0, "graded_at": 140.0}]
    first = abapi.response_as_of(rows, rows[0], 40.0)
    assert first["best"]["submission_id"] == 1 and first["total_submissions"] == 1 and first["improvement"] == 10.0
    failed = abapi.response_as_of(rows, rows[1], 40.0)
    assert failed["score"] == 0.0 and failed["error"] == "bad" and failed["best"]["score"] == 50.0
    assert abapi.response_as_of(rows, rows[2], 40.0)["total_submissions"] == 3
    assert [e["score"] for e in abapi.ledger(rows, 40.0)] == [50.0, 0.0, 70.0]
    t = abapi.time_fields(start=1000.5, budget_s=60, deadline=1060.5, last_submit=None)
    assert t["start_time"] == 1000 and t["timeout_s"] == 60 and t["remaining"] == 0 and t["end_time"] is None


def test_a_broken_folder_named_by_path_says_why(tmp_path):
    d = tmp_path / "broken"
    d.mkdir()
    (d / "config.yaml").write_text("start: nothere.sh\n")
    with pytest.raises(UsageError, match="nothere.sh"):
        find_agent(str(d), [])

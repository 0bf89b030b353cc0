"""`autorl-tui tasks` and `autorl-tui tasks validate` through the real CLI entry point."""

import json
import shutil
from pathlib import Path

import pytest

from autorl_tui.cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "tests" / "data" / "tasks" / "string-utils"


def run_cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_example_task_from_the_docs_is_valid(capsys, home_dir):
    code, out, _ = run_cli(capsys, "--home", str(home_dir), "tasks", "validate", str(EXAMPLE))
    assert code == 0, out
    assert "valid (train 4, dev 2, test 2)" in out


@pytest.mark.parametrize("task_id", ["humaneval", "alpaca-judge"])
def test_shipped_tasks_are_valid(capsys, home_dir, task_id):
    code, out, _ = run_cli(capsys, "--home", str(home_dir), "tasks", "validate", task_id)
    assert code == 0, out


def test_list_shows_level_scorer_splits_and_data(capsys, home_dir):
    code, out, _ = run_cli(capsys, "--home", str(home_dir), "--tasks-dir", str(EXAMPLE.parent), "tasks", "--json")
    assert code == 0
    rows = {r["id"]: r for r in map(json.loads, out.splitlines())}
    assert rows["humaneval"]["level"] == 1 and rows["humaneval"]["scorer"] == "unit_tests"
    assert rows["alpaca-judge"]["level"] == 2 and rows["alpaca-judge"]["splits"] == ["train", "dev", "test"]
    assert rows["string-utils"]["data_available"] is True
    code, out, _ = run_cli(capsys, "--home", str(home_dir), "tasks")
    assert code == 0 and out.splitlines()[0].split()[:4] == ["ID", "LEVEL", "SCORER", "SPLITS"]


def test_list_reports_missing_data(capsys, home_dir, tmp_path):
    task = tmp_path / "tasks" / "string-utils"
    shutil.copytree(EXAMPLE, task)
    (task / "data" / "dev.jsonl").unlink()
    code, out, _ = run_cli(capsys, "--home", str(home_dir), "--tasks-dir", str(tmp_path / "tasks"), "tasks", "--json")
    row = next(r for r in map(json.loads, out.splitlines()) if r["id"] == "string-utils")
    assert row["data_available"] is False and "dev.jsonl" in row["data"]


def test_every_problem_is_reported_with_a_fix(capsys, tmp_path):
    task = tmp_path / "broken-task"
    shutil.copytree(EXAMPLE, task)
    data = task / "data"
    train = [json.loads(l) for l in (data / "train.jsonl").read_text().splitlines()]
    dev = [json.loads(l) for l in (data / "dev.jsonl").read_text().splitlines()]
    leaked = dict(train[0], id="su-99")                      # same content as a train item, new id
    dev_bad = dev + [leaked, dict(dev[0], prompt="def other():\n")]   # and a duplicate id
    (data / "dev.jsonl").write_text("\n".join(json.dumps(x) for x in dev_bad) + "\n")
    (data / "test.jsonl").write_text(json.dumps({"id": "su-1", "prompt": "def z():\n", "entry_point": "z"}) + "\n")
    (task / "task.yaml").write_text(
        "id: string-utils\n"                 # differs from the folder name
        "level: 4\n"
        "scorer: no_such_scorer\n"
        "protocol: {prompt_format: plain, temperature: 0.0, n: 2, k: [1, 5]}\n"
        "data:\n  provider: files\n  splits:\n"
        "    train: {path: data/train.jsonl}\n    dev: {path: data/dev.jsonl}\n    test: {path: data/test.jsonl}\n")
    code, out, _ = run_cli(capsys, "tasks", "validate", str(task))
    assert code == 2
    expected = ["`primary_metric` is missing", "differs from its folder name", "level is 4",
                "scorer 'no_such_scorer' is not known", "does not state `max_tokens`", "pass@k needs 1 <= k <= n",
                "n > 1 with temperature 0", "duplicate ids ['su-5']", "splits train and test share 1 id(s)",
                "splits train and dev share 1 item(s) with the same content"]
    for text in expected:
        assert text in out, f"{text!r} not reported:\n{out}"
    assert out.count("fix:") >= len(expected)


def test_missing_split_and_unparsable_card(capsys, tmp_path):
    task = tmp_path / "string-utils"
    shutil.copytree(EXAMPLE, task)
    card = (task / "task.yaml").read_text().replace("    test: {path: data/test.jsonl}\n", "")
    (task / "task.yaml").write_text(card)
    code, out, _ = run_cli(capsys, "tasks", "validate", str(task))
    assert code == 2 and "split `test` is not declared" in out
    (task / "task.yaml").write_text("id: [unclosed\n")
    code, out, _ = run_cli(capsys, "tasks", "validate", str(task))
    assert code == 2 and "not valid YAML" in out


def test_unknown_task_id_exits_2_and_lists_known(capsys, home_dir):
    code, _, err = run_cli(capsys, "--home", str(home_dir), "tasks", "validate", "no-such-task")
    assert code == 2 and "humaneval" in err


def test_scorer_options_are_checked_by_the_scorer(capsys, tmp_path):
    src = REPO / "autorl_tui" / "tasks" / "alpaca-judge"
    task = tmp_path / "alpaca-judge"
    shutil.copytree(src, task)
    (task / "anchors.jsonl").write_text('{"prompt": "p", "output_a": "x", "output_b": "y", "expected": "maybe"}\n')
    card = (task / "task.yaml").read_text().replace("timeout_s: 60", "timeout_s: soon")
    (task / "task.yaml").write_text(card)
    code, out, _ = run_cli(capsys, "tasks", "validate", str(task))
    assert code == 2
    assert "anchors:" in out and "expected (A, B or tie)" in out
    assert "scorer_options.timeout_s is 'soon'" in out


def test_files_in_a_benchmarks_official_shape_go_through_the_cards_normalizer(capsys, home_dir):
    """`provider: files` with `data.normalize`: arith-qa ships GSM8K-format files; the agent's train
    rows stay {question, answer}, held-out rows gain the id and prompt the scorer needs."""
    code, out, _ = run_cli(capsys, "--home", str(home_dir), "tasks", "validate",
                           str(EXAMPLE.parent / "arith-qa"))
    assert code == 0 and "valid (train 64, dev 12, test 12)" in out, out
    cached = next((home_dir / "cache" / "tasks" / "arith-qa").iterdir())
    train = [json.loads(x) for x in (cached / "train.jsonl").read_text().splitlines()]
    dev = [json.loads(x) for x in (cached / "dev.jsonl").read_text().splitlines()]
    assert set(train[0]) == {"question", "answer"} and train[0]["answer"].split("#### ")[-1].isdigit()
    assert dev[0]["id"] == "arith-qa-dev-00000" and dev[0]["prompt"] == dev[0]["question"]

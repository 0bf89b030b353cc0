"""The real grader worker (a subprocess) grades a task whose environment is code in the task's
folder (tests/data/tasks/number-walk, copied into tmp), and reports a card naming a class its
folder does not have as a scorer error."""

import json
import shutil
import subprocess
import sys

from autorl_tui.catalog.tasks import load_task_card, materialize
from tests.conftest import REPO

NUMBER_WALK = REPO / "tests" / "data" / "tasks" / "number-walk"


def run_worker(tmp_path, card, model_path, **overrides):
    split_path = materialize(card, "dev", tmp_path / "cache")
    protocol = dict(card.protocol.to_dict(), prompt_format="plain")
    request = {"task": card.to_dict(), "split": "dev", "split_path": str(split_path), "protocol": protocol,
               "scorer": card.scorer, "scorer_options": card.scorer_options, "backend": "transformers",
               "device": "cpu", "threads": 1, "seed": 0, "scratch_dir": str(tmp_path / "scratch"),
               "model_path": str(model_path), **overrides}
    req, res = tmp_path / "REQUEST.json", tmp_path / "RESULT.json"
    req.write_text(json.dumps(request))
    proc = subprocess.run([sys.executable, "-m", "autorl_tui.grading.worker", str(req), str(res)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(res.read_text())


def test_worker_plays_the_episodes_of_an_environment_from_the_task_folder(tmp_path):
    from autorl_tui.tasks.alfworld.tiny_model import build   # a small untrained model, built in seconds
    model = build(tmp_path / "model")
    task = tmp_path / "number-walk"
    shutil.copytree(NUMBER_WALK, task)
    card = load_task_card(task)
    result = run_worker(tmp_path, card, model)
    assert result["ok"] is True, result
    assert result["scorer"] == "env_success" and result["metrics"]["episodes"] == 4
    for sample in result["samples"]:
        steps = sample["data"]["trajectory"]
        assert steps and steps[0]["observation"].startswith("You stand on ")      # the folder's episode
        assert steps[0]["prompt"].endswith("\nYour command:")                    # and its prompt
        assert sample["data"]["outcome"] in ("won", "max_steps") and len(steps) <= card.protocol.max_steps

    result = run_worker(tmp_path, card, model, scorer="environment:NoSuchScorer")
    assert result["ok"] is False and result["error_kind"] == "scorer" and "NoSuchScorer" in result["error"]

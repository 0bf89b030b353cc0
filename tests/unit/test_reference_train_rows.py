"""The reference agent reads GSM8K's own training rows (the `autorl-bench` protocol's workspace
shape) as it reads the harness's item shape: the question as the prompt, the number after ####."""

import json
import subprocess
import sys

import pytest

from autorl_tui.catalog.tasks import find_task, materialize, read_items, task_search_path
from tests.support.harness import REPO
from tests.unit.test_grading_gsm8k import write_gsm8k

PIPELINE = REPO / "autorl_tui" / "builtin" / "agents" / "reference"


@pytest.mark.subprocess
def test_gsm8k_rows_become_pipeline_items(tmp_path, monkeypatch):
    write_gsm8k(tmp_path / "gsm8k")
    monkeypatch.setenv("GSM8K_PATH", str(tmp_path / "gsm8k"))
    train = materialize(find_task("gsm8k", task_search_path()), "train", tmp_path / "cache")
    assert set(read_items(train)[0]) == {"question", "answer"}
    code = ("import json, sys; from pipeline.common import load_train; "
            "print(json.dumps(load_train(sys.argv[1])[:2]))")
    out = subprocess.run([sys.executable, "-c", code, str(train)], cwd=PIPELINE, capture_output=True, text=True,
                         check=True).stdout
    first, second = json.loads(out)
    assert first["prompt"] == "Ann has 0 pens and buys 1,000 more. How many now?"
    assert first["answer"] == "1000" and first["solution"].endswith("#### 1,000")
    assert second["answer"] == "1001"

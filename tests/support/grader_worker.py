"""One grading by the real grader worker subprocess, for tests."""

import json
import subprocess
import sys

from autorl_tui.catalog.tasks import find_task, materialize, task_search_path
from tests.conftest import REPO


def run_worker(tmp_path, *, with_stderr=False, **overrides):
    """The real grader worker (`python -m autorl_tui.grading.worker`) on arith dev: the request's
    defaults (CPU, 1 thread, 40 items) updated with `overrides`; its RESULT (and its stderr)."""
    card = find_task("arith", task_search_path())
    split_path = materialize(card, "dev", tmp_path / "cache")
    request = {"task": card.to_dict(), "split": "dev", "split_path": str(split_path),
               "protocol": card.protocol.to_dict(), "scorer": card.scorer, "scorer_options": {},
               "backend": "transformers", "device": "cpu", "threads": 1, "seed": 0,
               "scratch_dir": str(tmp_path / "scratch"), "limit": 40, **overrides}
    req, res = tmp_path / "REQUEST.json", tmp_path / "RESULT.json"
    req.write_text(json.dumps(request))
    proc = subprocess.run([sys.executable, "-m", "autorl_tui.grading.worker", str(req), str(res)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".RESULT")]   # atomic: no temp left
    result = json.loads(res.read_text())
    return (result, proc.stderr) if with_stderr else result

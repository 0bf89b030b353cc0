"""The grader worker's progress (samples done / total) as the engine's grading client sees it
while it waits: the real worker on the real tiny model, and garbage progress files ignored."""

import asyncio
import json
import os

import pytest

from autorl_tui.catalog.tasks import find_task, materialize, task_search_path
from autorl_tui.grading_host.grading_client import read_progress, run_grader


@pytest.mark.slow
def test_worker_writes_progress_that_the_client_reports_while_grading(tmp_path, tiny_model_dir):
    card = find_task("arith", task_search_path())
    split_path = materialize(card, "dev", tmp_path / "cache")
    protocol = {**card.protocol.to_dict(), "batch_size": 10}
    request = {"task": card.to_dict(), "split": "dev", "split_path": str(split_path), "protocol": protocol,
               "scorer": card.scorer, "scorer_options": {}, "backend": "transformers", "device": "cpu",
               "threads": 1, "seed": 0, "scratch_dir": str(tmp_path / "scratch"), "limit": 40,
               "model_path": str(tiny_model_dir)}
    heard = []
    work = tmp_path / "work"
    outcome = asyncio.run(run_grader(request, work, timeout_s=600,
                                     on_progress=lambda done, total, stage: heard.append((done, total, stage))))
    assert outcome.ok, outcome.error
    assert json.loads((work / "progress.json").read_text()) == {"done": 40, "total": 40, "stage": "inference"}
    assert heard and heard[-1] == (40, 40, "inference"), heard
    assert all(total == 40 and stage == "inference" for _, total, stage in heard), heard
    dones = [done for done, _, _ in heard]
    assert dones == sorted(set(dones)), heard              # strictly increasing, never repeated
    assert all(d % 10 == 0 for d in dones), heard          # one step per batch of 10
    assert not [p for p in work.iterdir() if p.name.startswith(".progress")]    # atomic: no temp left


def test_garbage_progress_files_are_ignored(tmp_path):
    assert read_progress(tmp_path) is None                     # none yet
    progress = tmp_path / "progress.json"
    for garbage in ("{not json", "[]", '{"done": 5}', '{"done": 9, "total": 4, "stage": "inference"}',
                    '{"done": -1, "total": 4, "stage": "inference"}', '{"done": "1", "total": 4, "stage": "x"}',
                    '{"done": true, "total": 4, "stage": "x"}', " " * 10000):
        progress.write_text(garbage)
        assert read_progress(tmp_path) is None, garbage
    progress.unlink()
    (tmp_path / "elsewhere.json").write_text('{"done": 1, "total": 2, "stage": "inference"}')
    os.symlink(tmp_path / "elsewhere.json", progress)         # a planted link is not followed
    assert read_progress(tmp_path) is None
    progress.unlink()
    os.mkfifo(progress)                                        # nor does a FIFO block the engine
    assert read_progress(tmp_path) is None
    progress.unlink()
    progress.write_text('{"done": 3, "total": 4, "stage": "episodes"}')
    assert read_progress(tmp_path) == (3, 4, "episodes")

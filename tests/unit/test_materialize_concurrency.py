"""Concurrent first materializations of a task's splits (issue 24, breach 9: concurrent first runs
shared a fixed `<split>.tmp`, one of four failed). Four separate processes on a fresh cache all
succeed, return the same paths, and the files are complete and identical to a lone build."""

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autorl_tui.catalog.tasks import load_task_card, materialize

REPO = Path(__file__).resolve().parents[2]
CARD = REPO / "autorl_tui" / "tasks" / "arith" / "task.yaml"

PROGRAM = """
import json, os, sys, time
from pathlib import Path
from autorl_tui.catalog.tasks import load_task_card, materialize
go = Path(sys.argv[2])
Path(sys.argv[4]).touch()       # imported: ready
while not go.exists():          # all four start materializing at the same moment
    time.sleep(0.001)
card = load_task_card(Path(sys.argv[1]))
print(json.dumps({s: str(materialize(card, s, Path(sys.argv[3]))) for s in card.splits}))
"""


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.subprocess
def test_four_processes_materialize_the_same_splits_at_once(tmp_path):
    cache = tmp_path / "cache"
    go = tmp_path / "go"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    ready = [tmp_path / f"ready-{i}" for i in range(4)]
    procs = [subprocess.Popen([sys.executable, "-c", PROGRAM, str(CARD), str(go), str(cache), str(r)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in ready]
    # start them together once every interpreter has imported the package
    deadline = time.time() + 120
    while not all(r.exists() for r in ready):
        assert time.time() < deadline and all(p.poll() is None for p in procs), "a materializer did not start"
        time.sleep(0.01)
    go.touch()
    results = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err
    paths = [json.loads(out) for out, _ in results]
    assert all(p == paths[0] for p in paths)
    card = load_task_card(CARD)
    lone = {s: materialize(card, s, tmp_path / "lone") for s in card.splits}
    for split, path in paths[0].items():
        assert _digest(Path(path)) == _digest(lone[split])
        assert len(Path(path).read_text().splitlines()) == len(lone[split].read_text().splitlines()) > 0
    leftovers = [p.name for p in Path(paths[0]["train"]).parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []

"""`autorl-tui gpus` as a user runs it."""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def cli(*args):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "autorl_tui", *args], capture_output=True, text=True, env=env,
                          timeout=60)


def test_declared_inventory_as_json():
    p = cli("--gpus", "0,1,2,3", "gpus", "--json")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["source"] == "declared" and [g["id"] for g in data["gpus"]] == ["0", "1", "2", "3"]
    assert set(data["docker"]) == {"available", "detail"}


def test_bad_gpu_list_is_a_usage_error():
    p = cli("--gpus", "0,zero", "gpus")
    assert p.returncode == 2 and "not valid" in p.stderr and "UUIDs" in p.stderr

"""`autorl-tui doctor` says what each GPU is (name, UUID, memory), which run holds it, and whether
gradings will run on it. A real doctor subprocess over a real store; NVML (which cannot run
without an NVIDIA driver) is the stand-in module tests/support/standin_pynvml/pynvml.py describing
an 8-GPU box, and the engine's own CUDA_VISIBLE_DEVICES gives it GPUs 4 and 5."""

from __future__ import annotations

import json

from autorl_tui.store import Store
from tests.support.harness import REPO, cli

UUIDS = [f"GPU-{i:08x}-aaaa-bbbb-cccc-{i:012x}" for i in range(8)]


def _home_with_a_run_on_gpu_5(home):
    home.mkdir()
    store = Store(home / "store.db")
    store.add_plan("p1", "gpu", "", 0.0)
    store.add_run({"id": "r0001-arith-trainer-s0", "plan_id": "p1", "plan_name": "gpu", "task": "arith", "level": 1,
                   "agent": "trainer", "model": "tiny", "driver": None, "seed": 0, "budget_s": 600.0,
                   "executor": "local", "gpus_requested": 1, "priority": 0, "queue_pos": 0, "state": "running",
                   "current_attempt": 1, "created_at": 1.0, "spec": {"executor": "local"}})
    store.add_attempt({"run_id": "r0001-arith-trainer-s0", "number": 1, "state": "running", "executor": "local",
                       "started_at": 2.0, "gpus": ["5"], "log_dir": str(home / "runs")})
    store.flush()
    store.close()


def test_doctor_names_each_gpu_its_holder_and_where_gradings_run(tmp_path):
    home = tmp_path / "home"
    _home_with_a_run_on_gpu_5(home)
    box = json.dumps([{"uuid": u, "name": "NVIDIA H100 80GB HBM3", "memory": 80 << 30} for u in UUIDS])
    env = {"PYTHONPATH": f"{REPO / 'tests' / 'support' / 'standin_pynvml'}:{REPO}", "STANDIN_NVML": box,
           "CUDA_VISIBLE_DEVICES": "4,5"}
    proc = cli("doctor", "--json", home=home, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    gpus = json.loads(proc.stdout)["gpus"]
    assert gpus["source"] == "nvml"
    devices = {d["id"]: d for d in gpus["devices"]}
    assert list(devices) == ["4", "5"]                              # the engine's CUDA_VISIBLE_DEVICES
    assert devices["5"]["uuid"] == UUIDS[5] and devices["5"]["name"] == "NVIDIA H100 80GB HBM3"
    assert devices["5"]["memory_total"] == 80 << 30
    assert devices["5"]["held_by"] == "r0001-arith-trainer-s0" and devices["4"]["held_by"] is None
    import torch

    assert devices["4"]["gradings"]["on_gpu"] is torch.cuda.is_available()   # CPU torch here: no, with why
    assert devices["4"]["gradings"]["why"]
    text = cli("doctor", home=home, env=env, timeout=300)
    assert text.returncode == 0, text.stderr
    line = next(x for x in text.stdout.splitlines() if x.strip().startswith("5 "))
    assert UUIDS[5] in line and "80 GiB" in line and "held by: r0001-arith-trainer-s0" in line
    assert "gradings here:" in line
    # Where Ray's own output goes (the engine's driver process), never the operator's terminal.
    assert f"Ray's own log (the engine's driver process): {home.resolve() / 'ray-driver.log'}" in text.stdout


def test_a_cuda_visible_devices_naming_no_gpu_is_one_clear_line(tmp_path):
    box = json.dumps([{"uuid": u} for u in UUIDS[:2]])
    env = {"PYTHONPATH": f"{REPO / 'tests' / 'support' / 'standin_pynvml'}:{REPO}", "STANDIN_NVML": box,
           "CUDA_VISIBLE_DEVICES": "0,7"}
    proc = cli("gpus", home=tmp_path / "home", env=env, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "CUDA_VISIBLE_DEVICES='0,7' names '7'" in proc.stderr

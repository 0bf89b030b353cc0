"""What a grading pays besides its inference (issue 36, docs/grading.md "Where a warm grading's
time goes"): the cheap parts of the fixes, checked without starting a grader."""
import os
import random

import numpy as np
import pytest
import torch

from autorl_tui.grading.inference import seed_everything
from autorl_tui.grading_host.grading_client import _grader_env
from autorl_tui.isolation import sandbox_bwrap


def test_a_cpu_grading_loads_weights_without_a_loader_thread_pool_and_a_gpu_grading_keeps_it(monkeypatch):
    monkeypatch.setenv("GAMES_DIR", "/data/games")
    req = {"task": {"data": {"grader_env": ["GAMES_DIR"]}}}
    cpu = _grader_env(req, [], 1)
    assert cpu["HF_DEACTIVATE_ASYNC_LOAD"] == "1"
    assert cpu["GAMES_DIR"] == "/data/games"             # the card's data folders still pass
    assert "HF_DEACTIVATE_ASYNC_LOAD" not in _grader_env(req, ["0"], 1)


def _draws():
    return random.random(), float(np.random.rand()), torch.rand(4).tolist()


def test_seeding_a_cpu_grading_draws_as_torch_manual_seed_does_and_queues_nothing_for_cuda():
    if torch.cuda.is_initialized():
        pytest.skip("CUDA is started in this process: nothing is queued for it either way")
    tracker = torch.cuda._lazy_seed_tracker       # CUDA's seeding, queued with the caller's stack

    seed_everything(11, accelerators=False)
    queued = tracker.manual_seed_all_cb
    cpu_only = _draws()
    seed_everything(11, accelerators=False)
    assert tracker.manual_seed_all_cb is queued       # no stack captured for a CUDA that never starts
    seed_everything(11)
    everything = _draws()
    assert cpu_only == everything
    assert tracker.manual_seed_all_cb is not queued   # what the CPU path avoids
    seed_everything(12, accelerators=False)
    assert _draws() != everything


def test_a_uid_lease_names_its_holder_in_place():
    if os.geteuid() != 0:
        pytest.skip("uid leases are the root engine's")
    with sandbox_bwrap.UidLease.acquire() as lease:
        text = (sandbox_bwrap.LEASE_DIR / str(lease.uid)).read_text()
    assert text == f"{os.getpid():>10}\n"

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


@pytest.mark.subprocess
def test_skipping_the_meta_init_loads_the_same_model_and_draws_the_same(tmp_path, tiny_model_dir):
    """TransformersPolicy loads with torch.nn.init skipped on meta tensors and the config parsed once:
    the same parameters, buffers and generator state as transformers' own from_pretrained, also for
    a checkpoint that lacks weights (those are initialised after the load, not skipped)."""
    import shutil

    import safetensors.torch
    from transformers import AutoModelForCausalLM

    from autorl_tui.grading.inference import TransformersPolicy, meta_init_skipped

    lacking = tmp_path / "lacking"
    shutil.copytree(tiny_model_dir, lacking)
    weights = safetensors.torch.load_file(lacking / "model.safetensors")
    for name in ("model.layers.1.mlp.up_proj.weight", "model.norm.weight"):
        del weights[name]
    safetensors.torch.save_file(weights, lacking / "model.safetensors", metadata={"format": "pt"})
    for folder in (tiny_model_dir, lacking):
        seed_everything(3, accelerators=False)
        plain = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=False, local_files_only=True,
                                                     weights_only=True)
        after_plain = torch.rand(4)
        seed_everything(3, accelerators=False)
        model = TransformersPolicy(folder, threads=1).model
        after = torch.rand(4)
        want, got = plain.state_dict(), model.state_dict()
        assert list(got) == list(want)
        assert [k for k in want if not torch.equal(want[k], got[k])] == []
        assert all(torch.equal(b, dict(model.named_buffers())[k]) for k, b in plain.named_buffers())
        assert torch.equal(after, after_plain)
    meta = torch.empty(3, device="meta")
    real = torch.zeros(3)
    with meta_init_skipped():
        assert torch.nn.init.normal_(meta) is meta
        torch.nn.init.ones_(real)
    assert torch.equal(real, torch.ones(3))             # off the meta device: initialised as before
    assert torch.nn.init.normal_.__name__ == "normal_" and not hasattr(torch.nn.init.normal_, "__wrapped__")

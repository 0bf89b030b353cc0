"""A warm grader on GPUs has its spare children open CUDA before their job (issue 35): the option
the engine starts it with, decided from the server's devices, the setting and vLLM's presence.
The warm-up itself needs a GPU: tests/gpu/test_gpu_grading.py (the sandboxed warm gradings)."""
import os
from pathlib import Path

import pytest

from autorl_tui.grading.warm_server import cuda_warmup_devices
from autorl_tui.grading_host.grader_service import ServerKey, cuda_warmup_args


def _key(gpus: tuple[str, ...]) -> ServerKey:
    return ServerKey(grading_root=Path("/g"), task_dir=None, gpus=gpus, threads=1, python="python3")


def test_a_server_on_gpus_warms_its_spares_on_them_as_its_sandbox_numbers_them(monkeypatch):
    monkeypatch.delenv("AUTORL_GRADER_CUDA_WARMUP", raising=False)
    assert cuda_warmup_args(_key(("3", "5"))) == ["--cuda-warmup", "0,1"]      # only their nodes are bound
    uuid = "GPU-ad552c29-c663-ec1e-ffe3-1d450aceb52c"
    assert cuda_warmup_args(_key((uuid,))) == ["--cuda-warmup", uuid]
    assert cuda_warmup_args(_key(())) == []                                     # a CPU server: nothing to open


def test_the_setting_turns_it_off(monkeypatch):
    monkeypatch.setenv("AUTORL_GRADER_CUDA_WARMUP", "0")
    assert cuda_warmup_args(_key(("0",))) == []


def test_not_where_vllm_could_take_the_grading(monkeypatch, tmp_path):
    monkeypatch.delenv("AUTORL_GRADER_CUDA_WARMUP", raising=False)
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("")      # an importable `vllm` package
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cuda_warmup_args(_key(("0",))) == []


def test_a_bad_setting_is_refused_with_what_to_set(monkeypatch):
    from autorl_tui import settings

    monkeypatch.setenv("AUTORL_GRADER_CUDA_WARMUP", "maybe")
    with pytest.raises(settings.UsageError, match="AUTORL_GRADER_CUDA_WARMUP='maybe' is not a switch"):
        cuda_warmup_args(_key(("0",)))


def test_the_server_reads_its_devices_from_its_arguments():
    assert cuda_warmup_devices([]) is None
    assert cuda_warmup_devices(["--cuda-warmup", "0,1"]) == "0,1"
    for bad in (["--cuda-warmup"], ["--cuda-warmup", ""], ["--cuda-warmup", "--other"]):
        with pytest.raises(SystemExit, match="needs the devices"):
            cuda_warmup_devices(bad)


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a machine with CUDA warms up on it")
def test_a_spare_that_cannot_open_cuda_still_warms_up_on_the_cpu(tmp_path, monkeypatch, capfd):
    """A server told to warm its spares on GPUs on a host whose torch cannot open CUDA (no CUDA
    build, no device) rehearses on the CPU instead of giving the warm-up up, and says so."""
    import torch

    from autorl_tui.grading.warm_server import warm_up_child, write_warmup_model

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    threads = torch.get_num_threads()
    folder = tmp_path / "warmup"
    folder.mkdir()
    write_warmup_model(str(folder))
    job_r, job_w = os.pipe()          # no job comes: every step runs
    try:
        result = warm_up_child(str(folder), job_r, cuda="0")
    finally:
        os.close(job_r)
        os.close(job_w)
        torch.set_num_threads(threads)
    assert result is not None and "score" in result, result            # the rehearsal ran whole
    assert "CUDA warm-up on 0 not possible" in capfd.readouterr().err

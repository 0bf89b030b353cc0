"""On a real NVIDIA GPU (issue 35): inference on cuda, the placement decision against real NVML,
the worker's vLLM fallback staying on the GPU, a sandboxed warm grading on the run's GPU, the
reference agent's SFT step on cuda in bf16, and a prompt's own context budget on cuda. Without
CUDA every test here SKIPS, loudly: these paths are then untested on that machine
(scripts/gpu-check.sh runs them on a GPU machine)."""

import asyncio
import json
import os
import shutil
import subprocess
import sys

import pytest

from autorl_tui.catalog.grading_choice import GradingChoice
from autorl_tui.catalog.tasks import find_task, materialize, task_search_path
from autorl_tui.grading.placement import GIB, decide
from tests.conftest import REPO
from tests.support.grader_worker import run_worker
from tests.support.waiting import wait_for


def _cuda() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    return None if torch.cuda.is_available() else "no CUDA device (torch.cuda.is_available() is False)"


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_cuda() is not None, reason=f"GPU test: {_cuda()}")]
PIPELINE = REPO / "autorl_tui" / "builtin" / "agents" / "reference" / "pipeline"


def _split(tmp_path, split="dev"):
    card = find_task("arith", task_search_path())
    return card, materialize(card, split, tmp_path / "cache")


def _prompts(path, n):
    with open(path) as fh:
        return [json.loads(line)["prompt"] for line in fh if line.strip()][:n]


def test_transformers_inference_runs_on_cuda_and_agrees_with_the_cpu(tmp_path, tiny_model_dir):
    from autorl_tui.grading.inference import TransformersPolicy

    card, split = _split(tmp_path)
    prompts = _prompts(split, 64)
    gpu = TransformersPolicy(tiny_model_dir, device="cuda", batch_size=64)
    assert gpu.device_used == "cuda:0"
    cpu = TransformersPolicy(tiny_model_dir, device="cpu", batch_size=64)
    on_gpu = [c[0].text for c in gpu.generate(prompts, max_tokens=card.protocol.max_tokens)]
    on_cpu = [c[0].text for c in cpu.generate(prompts, max_tokens=card.protocol.max_tokens)]
    same = sum(a == b for a, b in zip(on_gpu, on_cpu))
    assert same >= 0.9 * len(prompts), f"only {same}/{len(prompts)} greedy answers agree between cuda and cpu"


def test_the_placement_decision_follows_real_nvml_free_memory():
    import torch

    from autorl_tui.executors.gpus import Nvml, discover
    from autorl_tui.grading_host.grading_placement import gpu_memory

    inv = discover(Nvml())
    assert inv.source == "nvml" and inv.gpus, inv.note
    gid = inv.gpus[0].id
    before = gpu_memory([gid])
    assert before and before[0].total > 0 and 0 < before[0].free <= before[0].total
    facts_args = dict(max_tokens=256, vllm_installed=True)
    from autorl_tui.grading.placement import ModelFacts

    facts = ModelFacts(weights_bytes=3 * GIB, max_positions=32768, attention_heads=28, kv_bytes_per_token=28 * 1024)
    first = decide(GradingChoice(), [gid], before, facts, **facts_args)
    hog = torch.empty(int(8 * GIB), dtype=torch.uint8, device="cuda")     # an agent's trainer taking 8 GiB
    try:
        during = gpu_memory([gid])
        assert before[0].free - during[0].free >= 7 * GIB
        second = decide(GradingChoice(), [gid], during, facts, **facts_args)
    finally:
        del hog
        torch.cuda.empty_cache()
    assert first.device == second.device == "cuda" and second.devices == (gid,)
    if first.backend == second.backend == "vllm":
        assert second.gpu_memory_utilization < first.gpu_memory_utilization or first.gpu_memory_utilization == 0.9
        assert second.gpu_memory_utilization * during[0].total <= during[0].free


def test_a_ray_gradings_placement_on_its_node_uses_the_real_gpu(tiny_model_dir):
    """What a Ray node's grading actor decides (ray_grading.node_placement) on a real GPU: the plan's
    backend on the GPU Ray gave it, sized from this card's NVML, never the CPU; a `pool` choice is
    decided as shared over that GPU."""
    from autorl_tui.executors.gpus import Nvml, discover
    from autorl_tui.grading_host.ray_grading import node_placement

    inv = discover(Nvml())
    assert inv.source == "nvml" and inv.gpus, inv.note
    gid = inv.gpus[0].id
    request = {"model_path": str(tiny_model_dir), "protocol": {"max_tokens": 32}}
    chosen = node_placement(request, [gid], {"backend": "transformers"})
    assert (chosen.backend, chosen.device, chosen.devices, chosen.placement) == ("transformers", "cuda", (gid,),
                                                                                 "shared")
    auto = node_placement(request, [gid], {"placement": "pool", "pool_gpus": ["7"]})
    assert auto.device == "cuda" and auto.devices == (gid,) and auto.placement == "shared", auto
    if auto.backend == "vllm":
        assert 0.05 <= auto.gpu_memory_utilization <= 0.9 and auto.memory.get("devices", {}).get(gid), auto


def test_a_vllm_grading_stays_on_the_gpu_whether_vllm_starts_or_not(tmp_path, tiny_model_dir):
    from autorl_tui.grading_host.grading_placement import gpu_memory, read_model_facts, vllm_installed

    card, _ = _split(tmp_path)
    mem = gpu_memory(["0"])
    placement = decide(GradingChoice(backend="vllm"), ["0"], mem, read_model_facts(tiny_model_dir),
                       max_tokens=card.protocol.max_tokens, vllm_installed=True)
    result, stderr = run_worker(tmp_path, with_stderr=True, model_path=str(tiny_model_dir), threads=2, limit=100,
                                backend=placement.backend, device=placement.device, placement=placement.to_dict())
    assert result["ok"], result
    got = result["placement"]
    assert got["device_used"].startswith("cuda") and got["gpu_name"], got
    if vllm_installed():
        assert got["backend"] in ("vllm", "transformers")
    else:
        assert got["backend"] == "transformers" and got["fallback"]["from"] == "vllm", got
        assert "grading with transformers on cuda" in stderr


def _other_compute_processes(index: int) -> list[tuple[int, int]]:
    """(host pid, MiB) of the processes with a CUDA context on GPU `index`, this one left out."""
    import pynvml

    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        return [(p.pid, (p.usedGpuMemory or 0) >> 20) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
                if p.pid != os.getpid()]
    finally:
        pynvml.nvmlShutdown()


def test_a_sandboxed_warm_grading_runs_on_the_runs_gpu(tmp_path, tiny_model_dir):
    from autorl_tui.grading_host import grader_service
    from autorl_tui.isolation import sandbox_bwrap
    from autorl_tui.grading_host.grading_client import run_grader

    ok, why = sandbox_bwrap.probe()
    if not ok:
        pytest.skip(f"this host cannot sandbox the grader: {why}")
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    os.chmod(model, 0o755)
    card, split = _split(tmp_path)
    request = {"task": card.to_dict(), "split": "dev", "split_path": str(split), "model_path": str(model),
               "protocol": card.protocol.to_dict(), "scorer": card.scorer, "scorer_options": {},
               "backend": "transformers", "device": "cuda", "threads": 2, "seed": 0, "limit": 100,
               "placement": {"placement": "shared", "devices": ["0"]}}
    try:
        outcomes = [asyncio.run(run_grader(request, tmp_path / "gradings" / name, gpus=["0"], threads=2, timeout_s=600))
                    for name in ("a", "b")]
        server_log = (tmp_path / "gradings" / ".grader-server.log").read_text()
        # The next grading's spare, forked when the second one ended, holds a CUDA context on the
        # run's GPU while it waits (the warm-up opened it): a compute process on GPU 0 that is not this one.
        spare = wait_for(lambda: _other_compute_processes(0), 120, "the spare's CUDA context on GPU 0")
    finally:
        grader_service.close_all()
    for outcome in outcomes:
        assert outcome.ok, outcome.error
        assert outcome.placement["device_used"] == "cuda:0" and outcome.placement["gpu_name"], outcome.placement
    # The spares opened CUDA before their job (AUTORL_GRADER_CUDA_WARMUP, on by default): none gave up
    assert "no warm-up" not in server_log, server_log[-2000:]
    print(f"\nsandboxed warm gradings on cuda:0: {[round(o.wall_s, 2) for o in outcomes]} s; "
          f"model load / inference in the second's child: {outcomes[1].timings.get('load_s')} / "
          f"{outcomes[1].timings.get('inference_s')} s; a waiting spare holds "
          f"{', '.join(f'{mib} MiB' for _, mib in spare)} of the card")


def test_the_reference_sft_step_trains_on_cuda_in_bf16(tmp_path, tiny_model_dir):
    import torch

    work = tmp_path / "code"
    shutil.copytree(PIPELINE, work)
    _, train = _split(tmp_path, "train")
    (work / "data").mkdir()
    shutil.copy(train, work / "data" / "train.jsonl")
    env = {k: v for k, v in os.environ.items() if k != "METRICS_FILE"}
    proc = subprocess.run([sys.executable, "sft.py", "--model", str(tiny_model_dir), "--out", str(tmp_path / "v1"),
                           "--steps", "20", "--batch", "32", "--n_train", "640"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["stage"] == "sft" and summary["steps"] == 20
    assert summary["device"].startswith("cuda:0"), summary
    if torch.cuda.is_bf16_supported():
        assert summary["device"].endswith(" bf16"), summary
    assert (tmp_path / "v1" / "config.json").exists()
    print(f"\nreference SFT on {summary['device']}: 20 steps x 32 in {summary['train_s']} s")


def test_on_cuda_a_prompts_budget_is_its_own_and_a_full_context_is_refused(tiny_model_dir):
    """A prompt's budget is its own on cuda too (grading/context_budget.py), and a prompt that fills
    the context is refused there as on the CPU."""
    from autorl_tui.grading.inference import TransformersPolicy
    from tests.support.context_prompts import prompt_of

    gpu = TransformersPolicy(tiny_model_dir, device="cuda", batch_size=64, prompt_format="plain")
    limit = gpu.max_positions
    short = "Question: Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?\nAnswer:"
    long, over = prompt_of(gpu.tokenizer, limit - 10), prompt_of(gpu.tokenizer, limit + 5)
    alone = gpu.generate([short], max_tokens=40)[0][0]
    batched = gpu.generate([long, short, over], max_tokens=40)
    assert (batched[1][0].text, batched[1][0].tokens, batched[1][0].budget) == (alone.text, alone.tokens, 40)
    assert batched[0][0].budget == 10 and batched[0][0].tokens <= 10
    assert batched[2][0].finish_reason == "prompt_too_long" and f"holds {limit}" in batched[2][0].error

"""The grading placement decision (grading/placement.py) for given GPUs and free memory (stand-in
NVML numbers), and the plan's `grading:` key (catalog/plans.py)."""

import json

import pytest

from autorl_tui.catalog.grading_choice import GradingChoice, PlacementError
from autorl_tui.catalog.plans import parse_plan
from autorl_tui.grading_host import grading_placement
from autorl_tui.executors.gpus import Nvml
from autorl_tui.exitcodes import UsageError
from autorl_tui.grading.placement import GIB, GpuMemory, ModelFacts, decide, model_facts

# A 1.5 B-parameter bf16 model: ~3 GiB of weights, 28 heads, 32 k positions, 28 KiB of KV per token.
QWEN_ISH = ModelFacts(weights_bytes=3 * GIB, max_positions=32768, attention_heads=28,
                      kv_bytes_per_token=28 * 1024)
H100 = 80 * GIB


def shared(backend="auto"):
    return GradingChoice(placement="shared", backend=backend)


def test_no_gpu_grades_on_the_cpu_with_transformers():
    p = decide(shared(), [], [], QWEN_ISH, max_tokens=256, vllm_installed=True)
    assert (p.backend, p.device, p.devices, p.placement) == ("transformers", "cpu", (), "cpu")
    asked = decide(shared("vllm"), [], [], QWEN_ISH, max_tokens=256, vllm_installed=True)
    assert asked.backend == "transformers" and "vLLM needs one" in asked.reason


def test_shared_gpu_sizes_vllm_from_what_the_agent_leaves_free():
    # The agent's trainer holds 50 GiB of the card: vLLM's default 0.9 would not start; the
    # decision claims what is free less the reserve for the agent's growth (5% of 80 GiB = 4 GiB).
    p = decide(shared(), ["3"], [GpuMemory("3", free=30 * GIB, total=H100)], QWEN_ISH, max_tokens=256,
               vllm_installed=True)
    assert p.backend == "vllm" and p.device == "cuda" and p.devices == ("3",)
    assert p.gpu_memory_utilization == pytest.approx(26 / 80, abs=0.01)
    assert p.gpu_memory_utilization * H100 <= 30 * GIB - 4 * GIB
    assert p.enforce_eager is True                      # shares the agent's card
    assert p.max_model_len == 8192                       # capped below the model's 32 k positions
    assert p.tensor_parallel_size == 1
    assert p.vllm_args() == {"tensor_parallel_size": 1, "gpu_memory_utilization": p.gpu_memory_utilization,
                             "max_model_len": 8192, "enforce_eager": True}
    # More free memory, a bigger claim, never past vLLM's own 0.9.
    idle = decide(shared(), ["3"], [GpuMemory("3", free=H100, total=H100)], QWEN_ISH, max_tokens=256,
                  vllm_installed=True)
    assert idle.gpu_memory_utilization == 0.9


def test_too_little_free_memory_falls_back_to_transformers_on_the_same_gpu():
    p = decide(shared(), ["1"], [GpuMemory("1", free=int(4.5 * GIB), total=H100)], QWEN_ISH, max_tokens=256,
               vllm_installed=True)
    assert (p.backend, p.device, p.devices) == ("transformers", "cuda", ("1",))
    assert "transformers on the same device" in p.reason and p.memory["need_gib"] > p.memory["claim_gib"]


def test_vllm_not_installed_or_not_wanted_means_transformers_on_the_gpu():
    mem = [GpuMemory("0", free=H100, total=H100)]
    missing = decide(shared(), ["0"], mem, QWEN_ISH, max_tokens=64, vllm_installed=False)
    assert (missing.backend, missing.device) == ("transformers", "cuda") and "not installed" in missing.reason
    plain = decide(shared("transformers"), ["0"], mem, QWEN_ISH, max_tokens=64, vllm_installed=True)
    assert (plain.backend, plain.device) == ("transformers", "cuda")


def test_two_gpus_grade_with_tensor_parallelism_dividing_the_heads():
    mem = [GpuMemory("0", free=70 * GIB, total=H100), GpuMemory("1", free=40 * GIB, total=H100)]
    p = decide(shared(), ["0", "1"], mem, QWEN_ISH, max_tokens=256, vllm_installed=True)
    assert p.tensor_parallel_size == 2 and p.devices == ("0", "1")
    assert p.gpu_memory_utilization == pytest.approx(36 / 80, abs=0.01)   # the tighter card decides
    # 3 GPUs and 28 heads: 28 % 3 != 0, so tensor parallel 2 on the first two.
    three = decide(shared(), ["0", "1", "2"], mem + [GpuMemory("2", free=H100, total=H100)], QWEN_ISH,
                   max_tokens=256, vllm_installed=True)
    assert three.tensor_parallel_size == 2 and three.devices == ("0", "1")


def test_pool_placement_takes_the_freest_pool_gpus_and_leaves_the_run_alone():
    choice = GradingChoice(placement="pool", pool_gpus=("6", "7"))
    mem = [GpuMemory("6", free=10 * GIB, total=H100), GpuMemory("7", free=75 * GIB, total=H100)]
    p = decide(choice, ["2"], mem, QWEN_ISH, max_tokens=256, generated_tokens=10_000_000, vllm_installed=True)
    assert p.placement == "pool" and p.devices == ("7",) and p.backend == "vllm"
    assert p.gpu_memory_utilization == 0.9            # no agent on a pool GPU: no reserve
    assert p.enforce_eager is False                    # a long generation: CUDA graphs pay off
    # A CPU-only run is graded on the pool too.
    assert decide(choice, [], mem, QWEN_ISH, max_tokens=256, vllm_installed=False).devices == ("7",)


def test_max_model_len_covers_the_protocol_and_the_model():
    small = ModelFacts(weights_bytes=4 << 20, max_positions=256, attention_heads=4, kv_bytes_per_token=4096)
    p = decide(shared(), ["0"], [GpuMemory("0", free=H100, total=H100)], small, max_tokens=32, vllm_installed=True)
    assert p.max_model_len == 256
    long = ModelFacts(weights_bytes=GIB, max_positions=131072, attention_heads=8)
    assert decide(shared(), ["0"], [], long, max_tokens=16384, vllm_installed=True).max_model_len == 2048 + 16384


def test_model_facts_from_a_config():
    cfg = {"num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 4, "hidden_size": 128,
           "max_position_embeddings": 256, "torch_dtype": "float32"}
    f = model_facts(cfg, 4_200_000)
    assert (f.attention_heads, f.max_positions, f.weights_bytes) == (4, 256, 4_200_000)
    assert f.kv_bytes_per_token == 2 * 4 * 2 * 32 * 4
    assert model_facts({}, 0).kv_bytes_per_token is None


class FakeNvml:
    """pynvml's API for two stand-in cards (NVML numbers, not a mock of a part that runs here)."""

    class Mem:
        def __init__(self, used, total):
            self.used, self.total, self.free = used, total, total - used

    class Util:
        gpu = 10

    used = {0: 70 * GIB, 1: 2 * GIB}

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetMemoryInfo(self, h):
        return self.Mem(self.used[h], H100)

    def nvmlDeviceGetUtilizationRates(self, h):
        return self.Util()


def test_engine_gathers_free_memory_and_the_model_then_decides(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"num_attention_heads": 28, "num_hidden_layers": 28,
                                                      "hidden_size": 1536, "num_key_value_heads": 4,
                                                      "max_position_embeddings": 32768, "torch_dtype": "bfloat16"}))
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 1000)

    class Proto:
        max_tokens, n = 256, 1

    nvml = Nvml(FakeNvml())
    p = grading_placement.place({"grading": {"placement": "shared", "backend": "transformers"}}, ["0"], tmp_path,
                                Proto, 200, nvml)
    assert (p.backend, p.device, p.devices) == ("transformers", "cuda", ("0",))
    mem = grading_placement.gpu_memory(["0", "1"], nvml)
    assert [(m.id, m.free // GIB) for m in mem] == [("0", 10), ("1", 78)]
    facts = grading_placement.read_model_facts(tmp_path)
    assert facts.weights_bytes == 1000 and facts.attention_heads == 28 and facts.max_positions == 32768
    assert grading_placement.read_model_facts(tmp_path / "missing").weights_bytes == 0
    pooled = grading_placement.place({"grading": {"placement": "pool", "pool_gpus": [0, 1]}}, [], tmp_path,
                                     Proto, 200, nvml)
    assert pooled.devices == ("1",)


PLAN = "name: p\ntasks: [arith]\nagents: [baseline-copy]\nbudget: 60s\n"


def test_plan_grading_key_is_validated_with_clear_errors():
    plan = parse_plan(PLAN + "gpus_per_run: 1\ngrading: {placement: pool, pool_gpus: [6, 7], backend: vllm}\n")
    assert plan.runs[0].options["grading"] == {"placement": "pool", "pool_gpus": [6, 7], "backend": "vllm"}
    assert "grading" not in parse_plan(PLAN).runs[0].options
    bad = {"grading: pool\n": "must be a mapping",
           "grading: {placement: elsewhere}\n": "must be shared",
           "grading: {placement: pool}\n": "needs grading.pool_gpus",
           "grading: {pool_gpus: [1]}\n": "placement is shared",
           "grading: {placement: pool, pool_gpus: [1, 1]}\n": "more than once",
           "grading: {placement: pool, pool_gpus: [gpu1]}\n": "not a GPU id",
           "grading: {backend: tensorrt}\n": "must be one of auto, vllm, transformers",
           "grading: {gpus: 2}\n": "unknown key(s) gpus",
           "executor: ray\ngrading: {placement: pool, pool_gpus: [1]}\n": "ray run grades on its cluster"}
    for extra, words in bad.items():
        with pytest.raises(UsageError, match=None) as err:
            parse_plan(PLAN + extra, "p.yaml")
        assert words in str(err.value) and str(err.value).startswith("plan p.yaml:"), (extra, str(err.value))
    with pytest.raises(PlacementError):
        GradingChoice.from_dict({"placement": "pool"})


def test_the_shipped_gpu_demo_plan_asks_for_one_gpu_and_shared_grading():
    from autorl_tui.catalog.plans import load_plan
    from tests.conftest import REPO

    plan = load_plan(REPO / "data" / "plans" / "gpu-demo.yaml")
    (run,) = plan.runs
    assert (run.task, run.agent, run.model, run.gpus) == ("arith", "reference", "tiny", 1)
    assert GradingChoice.from_dict(run.options["grading"]) == GradingChoice("shared", (), "auto")


class CountingNvml(FakeNvml):
    """The stand-in cards, counting NVML's opens and shutdowns."""

    def __init__(self):
        self.inits = self.shutdowns = 0

    def nvmlInit(self):
        self.inits += 1

    def nvmlShutdown(self):
        self.shutdowns += 1


def test_placing_a_grading_shuts_the_nvml_it_opened_down(tmp_path, monkeypatch):
    """place() opens NVML to read the free memory; every open is matched by nvmlShutdown (issue 35).
    pynvml is the stand-in cards' (this machine has no NVIDIA driver)."""
    import sys

    counting = CountingNvml()
    monkeypatch.setitem(sys.modules, "pynvml", counting)

    class Proto:
        max_tokens, n = 64, 1

    for choice in ({"placement": "shared"}, {"placement": "pool", "pool_gpus": [0, 1]}):
        grading_placement.place({"grading": choice}, ["0"], tmp_path, Proto, 10)
    grading_placement.grading_devices({"grading": {"placement": "pool", "pool_gpus": [0, 1]}}, ["0"])
    assert counting.inits == 3 and counting.shutdowns == 3
    own = Nvml(counting)        # a caller's own NVML stays open: it shuts it down itself
    grading_placement.place({}, ["0"], tmp_path, Proto, 10, own)
    assert counting.inits == 4 and counting.shutdowns == 3


def test_the_warm_grader_is_prestarted_on_the_gpus_its_gradings_use():
    """`pool`: the freest pool GPUs, never the run's own (the agent trains there); `shared`: the
    run's; no GPU: none (issue 35)."""
    nvml = Nvml(FakeNvml())          # GPU 0 has 10 GiB free, GPU 1 78 GiB
    pool = {"grading": {"placement": "pool", "pool_gpus": [0, 1]}}
    assert grading_placement.grading_devices(pool, ["2"], nvml) == ["1"]
    assert grading_placement.grading_devices(pool, ["2", "3"], nvml) == ["1", "0"]
    assert grading_placement.grading_devices({"grading": {"placement": "shared"}}, ["2"], nvml) == ["2"]
    assert grading_placement.grading_devices({}, [], nvml) == []


def test_a_ray_grading_applies_the_plan_s_placement_on_its_node(tmp_path):
    """ray_grading.node_placement (on the node, for the GPUs Ray gave the grading): the plan's
    backend choice applied there, a `pool` decided as shared over the grading's own GPUs, and GPUs
    declared to Ray only (no device on the node) graded on the CPU with the reason said (issue 35)."""
    from autorl_tui.grading_host.ray_grading import node_placement

    (tmp_path / "config.json").write_text(json.dumps({"num_attention_heads": 4, "max_position_embeddings": 256}))
    request = {"model_path": str(tmp_path), "protocol": {"max_tokens": 32}}
    nvml = Nvml(FakeNvml())
    p = node_placement(request, ["1"], {"backend": "transformers"}, real_ids=["0", "1"], nvml=nvml)
    assert (p.backend, p.device, p.devices, p.placement) == ("transformers", "cuda", ("1",), "shared")
    p = node_placement(request, ["0"], {"placement": "pool", "pool_gpus": ["5"]}, real_ids=["0"], nvml=nvml)
    assert p.devices == ("0",) and p.placement == "shared" and p.device == "cuda"
    p = node_placement(request, ["0"], None, real_ids=[], nvml=nvml)
    assert (p.backend, p.device, p.devices) == ("transformers", "cpu", ()) and "declared to Ray only" in p.reason
    assert node_placement(request, [], None, real_ids=["0"], nvml=nvml).device == "cpu"

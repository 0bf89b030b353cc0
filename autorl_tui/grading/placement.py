"""Where a grading runs and with which engine settings: a pure decision (docs/grading.md, "GPU").

Given the run's GPUs, the plan's choice (`grading: {placement: shared | pool, pool_gpus: [...],
backend: auto | vllm | transformers}`), the free and total memory of each candidate GPU (NVML on
the engine; stand-in numbers in tests), what the model is (weights, positions, heads) and the
protocol's generation volume, `decide()` returns the backend, the devices, vLLM's
`tensor_parallel_size`, `gpu_memory_utilization`, `max_model_len` and `enforce_eager`, and a
one-line reason. Nothing here touches a GPU, a file or the environment.

The rules, in order:
- devices: `shared` grades on the run's own GPUs (none: the CPU); `pool` on the pool GPUs with the
  most free memory, as many as the run has GPUs (at least one), whatever the run holds.
- backend: `transformers` when asked, when there is no GPU, or when vLLM is not installed; `vllm`
  when asked or (`auto`) when it is installed and fits. vLLM fits when the memory it may take
  (`gpu_memory_utilization` x total on each device) holds the weights' share per device plus a
  working margin and the KV cache of one sequence of `max_model_len`. It may take what is free now
  less a reserve for the agent's own growth (shared GPUs), never more than MAX_UTILIZATION.
  When it does not fit, transformers on the same devices: never the CPU when there is a GPU.
- tensor_parallel_size: the most of the devices that divides the model's attention heads (vLLM only;
  transformers runs on the first device).
- max_model_len: the model's positions, capped at MAX_MODEL_LEN_CAP but never below what the
  protocol's max_tokens needs plus a prompt budget.
- enforce_eager: every grading starts a fresh engine (a fork-server child cannot keep CUDA), so CUDA
  graph capture (seconds, and memory) pays off only for large generations: eager when the grading
  generates fewer than EAGER_BELOW_TOKENS tokens or shares the agent's GPU.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from autorl_tui.catalog.grading_choice import GradingChoice

GIB = 1 << 30

MAX_UTILIZATION = 0.90        # vLLM's own default: the most of a card a grading may claim
MIN_UTILIZATION = 0.05        # below this vLLM is not worth starting
SHARED_RESERVE_FRACTION = 0.05   # on a GPU the agent trains on, left free for its growth...
SHARED_RESERVE_MIN = 1 * GIB     # ...at least this
WORKING_MARGIN = 1 * GIB         # CUDA context, activations, sampler buffers, per device
WEIGHTS_OVERHEAD = 1.2           # weights as loaded (buffers, alignment) against their file size
MAX_MODEL_LEN_CAP = 8192
PROMPT_BUDGET = 2048             # prompt tokens assumed when the protocol does not bound them
EAGER_BELOW_TOKENS = 200_000


@dataclass(frozen=True)
class GpuMemory:
    """One GPU as the decision sees it (bytes)."""
    id: str
    free: int
    total: int


@dataclass(frozen=True)
class ModelFacts:
    weights_bytes: int = 0
    max_positions: int | None = None
    attention_heads: int | None = None
    kv_bytes_per_token: int | None = None     # K and V, all layers, at the model's dtype


@dataclass(frozen=True)
class Placement:
    backend: str                       # vllm | transformers
    device: str                        # cuda | cpu
    devices: tuple[str, ...]           # GPU ids the grading sees (CUDA_VISIBLE_DEVICES); () on the CPU
    placement: str                     # shared | pool | cpu
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    enforce_eager: bool = True
    reason: str = ""
    memory: dict = field(default_factory=dict)   # what it was sized from (GiB), for the event

    def to_dict(self) -> dict:
        out = asdict(self)
        out["devices"] = list(self.devices)
        return out

    def vllm_args(self) -> dict:
        """The keyword arguments vllm.LLM gets from this placement."""
        return {"tensor_parallel_size": self.tensor_parallel_size,
                "gpu_memory_utilization": self.gpu_memory_utilization,
                "max_model_len": self.max_model_len, "enforce_eager": self.enforce_eager}


def max_model_len(facts: ModelFacts, max_tokens: int) -> int:
    need = PROMPT_BUDGET + max(1, int(max_tokens))
    cap = max(MAX_MODEL_LEN_CAP, need)
    return min(facts.max_positions, cap) if facts.max_positions else min(cap, need)


def tensor_parallel(n_devices: int, heads: int | None) -> int:
    for size in range(max(1, n_devices), 0, -1):
        if heads is None or heads % size == 0:
            return size
    return 1


def _gib(n: float) -> float:
    return round(n / GIB, 2)


def pick_devices(choice: GradingChoice, run_gpus: list[str], memory: dict[str, GpuMemory]) -> tuple[str, tuple]:
    """(shared | pool | cpu, the GPU ids a grading uses): the first rule of `decide`."""
    if choice.placement == "pool":
        want = max(1, len(run_gpus))
        ranked = sorted(choice.pool_gpus, key=lambda g: -(memory[g].free if g in memory else 0))
        return "pool", tuple(ranked[:want])
    return ("shared", tuple(run_gpus)) if run_gpus else ("cpu", ())


def decide(choice: GradingChoice, run_gpus: list[str], memory: list[GpuMemory], facts: ModelFacts, *,
           max_tokens: int, generated_tokens: int = 0, vllm_installed: bool = False) -> Placement:
    """The placement of one grading (module docstring). `memory` lists the candidate GPUs' free and
    total bytes (missing ones: unknown, sized as if the card were free); `generated_tokens` is the
    grading's expected output (items x samples x max_tokens)."""
    by_id = {m.id: m for m in memory}
    where, devices = pick_devices(choice, list(run_gpus), by_id)
    length = max_model_len(facts, max_tokens)
    if not devices:
        why = "no GPU for this grading" + (" (vLLM needs one)" if choice.backend == "vllm" else "")
        return Placement("transformers", "cpu", (), "cpu", max_model_len=length, reason=why)
    shared = where == "shared"
    base = dict(device="cuda", devices=devices, placement=where, max_model_len=length)
    if choice.backend == "transformers":
        return Placement("transformers", reason="the plan asks for transformers", **base)
    if not vllm_installed:
        why = "vLLM is not installed (pip install 'autorl-tui[gpu]')"
        return Placement("transformers", reason=why, **base)
    tp = tensor_parallel(len(devices), facts.attention_heads)
    used = devices[:tp]
    kv = (facts.kv_bytes_per_token or 0) * length
    need = facts.weights_bytes * WEIGHTS_OVERHEAD / tp + WORKING_MARGIN + kv / tp
    fractions, sized = [], {}
    for gid in used:
        mem = by_id.get(gid)
        if mem is None or mem.total <= 0:
            fractions.append(MAX_UTILIZATION)
            continue
        reserve = max(SHARED_RESERVE_MIN, SHARED_RESERVE_FRACTION * mem.total) if shared else 0
        may_take = min(MAX_UTILIZATION * mem.total, mem.free - reserve)
        fractions.append(may_take / mem.total)
        sized[gid] = {"free_gib": _gib(mem.free), "total_gib": _gib(mem.total), "reserve_gib": _gib(reserve)}
    utilization = max(0.0, int(min(fractions) * 100) / 100)
    totals = [by_id[g].total for g in used if g in by_id and by_id[g].total > 0]
    claim = utilization * min(totals) if totals else float("inf")
    memo = {"need_gib": _gib(need), "claim_gib": _gib(claim) if totals else None, "devices": sized}
    if utilization < MIN_UTILIZATION or claim < need:
        why = (f"vLLM would need {_gib(need)} GiB per device and may take {_gib(max(claim, 0))} GiB "
               f"(utilization {utilization:.2f}); transformers on the same device")
        return Placement("transformers", reason=why, memory=memo, **base)
    eager = shared or generated_tokens < EAGER_BELOW_TOKENS
    why = (f"vLLM on {where} GPU(s) {','.join(used)}: {utilization:.2f} of the card"
           + (f", tensor parallel {tp}" if tp > 1 else ""))
    return Placement("vllm", tensor_parallel_size=tp, gpu_memory_utilization=utilization, enforce_eager=eager,
                     reason=why, memory=memo, **{**base, "devices": used})


def model_facts(config: dict, weights_bytes: int) -> ModelFacts:
    """What the decision needs from a model's config.json (any missing field: unknown)."""
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    heads = text.get("num_attention_heads")
    kv_heads = text.get("num_key_value_heads") or heads
    layers = text.get("num_hidden_layers")
    hidden = text.get("hidden_size")
    head_dim = text.get("head_dim") or (hidden // heads if hidden and heads else None)
    dtype = str(text.get("torch_dtype") or text.get("dtype") or config.get("torch_dtype") or "float32")
    width = 4 if "32" in dtype else 2
    kv = 2 * layers * kv_heads * head_dim * width if layers and kv_heads and head_dim else None
    positions = text.get("max_position_embeddings")
    return ModelFacts(weights_bytes=int(weights_bytes), max_positions=int(positions) if positions else None,
                      attention_heads=int(heads) if heads else None, kv_bytes_per_token=kv)

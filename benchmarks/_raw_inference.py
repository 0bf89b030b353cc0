"""What the grading benchmarks compare a grading with: the same split generated in this process."""
import time
from pathlib import Path


def raw_inference(card, items: list[dict], model: Path, threads: int, device: str = "cpu"):
    """The model loaded in this process and warmed up (one generation): returns a function that
    times one batched generation of the split, as the protocol asks for it. On CPU with the
    grading's malloc settings (grading/malloc_tuning.py), as its threads: the floor is the same
    generation run as well as this process can, not a default process's."""
    import torch
    from transformers.utils import logging as hf_logging

    from autorl_tui.grading.inference import TransformersPolicy
    from autorl_tui.grading.malloc_tuning import keep_freed_memory

    if device == "cpu":
        keep_freed_memory()
    hf_logging.disable_progress_bar()
    torch.set_num_threads(threads)
    p = card.protocol
    policy = TransformersPolicy(model, device=device, threads=threads, seed=p.seed, prompt_format=p.prompt_format,
                                system_prompt=p.system_prompt, batch_size=p.batch_size)
    prompts = [it["prompt"] for it in items]

    def once() -> float:
        t0 = time.perf_counter()
        policy.generate(prompts, n=p.n, temperature=p.temperature, top_p=p.top_p, max_tokens=p.max_tokens, stop=p.stop)
        return time.perf_counter() - t0

    once()     # warm-up
    return once


def phase_medians_ms(outcomes) -> str:
    """The gradings' spans (`GradingOutcome.phases`), each the median over the outcomes, in ms."""
    import statistics

    names = list(outcomes[0].phases)
    return " ".join(f"{k}={statistics.median(o.phases.get(k, 0.0) for o in outcomes) * 1000:.1f}"
                    for k in names if k != "total")

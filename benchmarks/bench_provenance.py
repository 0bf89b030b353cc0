"""Cost of model provenance (issue 37) on a submission of BENCH_PROVENANCE_MB (default 1024 MiB of
fp32 safetensors), against the grading of the same submission:

- a Llama-shaped base of that size over the tiny model's tokenizer is built and saved, and a
  "fine-tune" of it (every tensor moved by ~1 % noise, saved as a separate folder);
- provenance_s: `python -m autorl_tui.grading.provenance BASE SUB OUT` as the engine runs it
  (engine/trust_provenance.run_provenance: a subprocess, one thread), wall seconds, and its
  throughput in s per GB of submission; the record's own `seconds` (the comparison without the
  interpreter's start) beside it;
- grading_s: the same submission graded on the arith dev split as the engine grades it
  (grading_host/grading_client.run_grader, a fresh worker, CPU, BENCH_THREADS threads), and
  provenance_over_grading, the ratio. BENCH_GRADE=0 leaves the grading out.
"""
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
THREADS = int(os.environ.get("BENCH_THREADS", "2"))
os.environ.update({"OMP_NUM_THREADS": str(THREADS), "GOMP_SPINCOUNT": "1000", "TOKENIZERS_PARALLELISM": "false"})
SIZE_MB = int(os.environ.get("BENCH_PROVENANCE_MB", "1024"))
GRADE = os.environ.get("BENCH_GRADE", "1") != "0"


def build_pair(root: Path) -> tuple[Path, Path, int]:
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    from autorl_tui.tasks.arith.tiny_model import build_tokenizer

    tok = build_tokenizer(0)
    hidden, inter = 1024, 4096
    per_layer = 2 * hidden * hidden + 2 * hidden * (hidden // 4) + 3 * hidden * inter
    layers = max(1, round((SIZE_MB * 2**20 / 4 - len(tok) * hidden) / per_layer))
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                      num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=256,
                      tie_word_embeddings=True, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                      bos_token_id=None, dtype="float32")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg)
    base, sub = root / "base", root / "sub"
    model.save_pretrained(base, safe_serialization=True)
    tok.save_pretrained(base)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * (0.01 * p.std().clamp_min(1e-3)))
    model.save_pretrained(sub, safe_serialization=True)
    tok.save_pretrained(sub)
    for path in [root, *root.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    n_bytes = sum(f.stat().st_size for f in sub.glob("*.safetensors"))
    return base, sub, n_bytes


def grade(model: Path, work: Path) -> float:
    from autorl_tui.catalog.tasks import find_task, materialize, task_search_path
    from autorl_tui.grading_host.grading_client import run_grader

    card = find_task("arith", task_search_path())
    split = materialize(card, "dev", work / "data")
    req = {"task": card.to_dict(), "split": "dev", "split_path": str(split), "model_path": str(model),
           "protocol": card.protocol.to_dict(), "scorer": card.scorer, "scorer_options": {},
           "backend": "transformers", "device": "cpu", "threads": THREADS, "seed": card.protocol.seed}
    t0 = time.perf_counter()
    outcome = asyncio.run(run_grader(req, work / "grading", threads=THREADS, timeout_s=3600))
    if not outcome.ok:
        raise SystemExit(f"grading failed: {outcome.error}")
    return time.perf_counter() - t0


def main() -> None:
    from autorl_tui.engine.trust_provenance import run_provenance

    root = Path(tempfile.mkdtemp(prefix="bench-provenance-"))
    os.chmod(root, 0o755)          # the sandboxed grader's uid reads the submission
    try:
        t0 = time.perf_counter()
        base, sub, n_bytes = build_pair(root)
        print(f"submission: {n_bytes / 2**20:.0f} MiB of safetensors (built in {time.perf_counter() - t0:.1f} s)")
        t0 = time.perf_counter()
        rec = asyncio.run(run_provenance(base, sub, root / "provenance.json"))
        wall = time.perf_counter() - t0
        if not rec.get("ok"):
            raise SystemExit(f"provenance failed: {rec.get('error')}")
        print(f"provenance_verdict: {rec['verdict']} (median relative distance {rec['median_rel']:.4f})")
        print(f"provenance_s: {wall:.2f} s")
        print(f"provenance_compare_s: {rec['seconds']:.2f} s (in the worker, without its start)")
        print(f"provenance_s_per_gb: {wall / (n_bytes / 1e9):.2f} s/GB")
        if GRADE:
            graded = grade(sub, root)
            print(f"grading_s: {graded:.2f} s (arith dev, 200 problems, CPU, {THREADS} threads)")
            print(f"provenance_over_grading: {wall / graded:.3f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

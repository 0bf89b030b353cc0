"""Grader worker: one evaluation in its own process. Knows nothing of runs or agents.

    python -m autorl_tui.grading.worker REQUEST.json RESULT.json

REQUEST: {"task": card dict, "split": "dev", "split_path": ".../dev.jsonl", "model_path": "...",
          "protocol": {...}, "scorer": "exact_match", "scorer_options": {...}, "backend": "transformers",
          "device": "cpu", "threads": 2, "seed": 0, "scratch_dir": "...", "limit": null,
          "template_limits": {"per_prompt_s": 5, "total_s": 60}}   (null disables a chat-template limit)
PROGRESS (rewritten atomically next to RESULT, as progress.json): {"done", "total", "stage"}.
RESULT (written atomically): {"ok": true, "score", "metrics", "samples", "timings", "grader_version",
          "scorer", "scorer_version"} or {"ok": false, "error", "error_kind", "traceback", ...}, both
          with "stamps" (wall-clock times: request_read, load_start, loaded, evaluated, ...).
Exit code 0 whenever RESULT was written (even with ok=false); 2 when it could not be.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from autorl_tui.grading import GRADER_VERSION
from autorl_tui.grading.progress import PROGRESS_FILE, ProgressFile

ERROR_KINDS = ("invalid_model", "data", "scorer", "memory", "internal")


class GradingError(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class _TimedPolicy:
    """Counts the time spent inside the backend so the worker can report inference vs scoring,
    and what the model's context did to the prompts (context_budget.Tally: `metrics.context`)."""

    def __init__(self, policy: Any):
        from autorl_tui.grading.context_budget import Tally

        self._policy = policy
        self.seconds = 0.0
        self.calls = 0
        self.context = Tally(getattr(policy, "max_positions", None))

    def generate(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            out = self._policy.generate(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - t0
            self.calls += 1
        self.context.add(out, int(kwargs.get("max_tokens", 64)))
        return out

    def __getattr__(self, name):        # interactive scorers may use backend extras (tokenizer, ...)
        return getattr(self._policy, name)


def write_result(path: Path, result: dict) -> None:
    """Whole or not at all (a temp file renamed over it). Not fsynced: the engine reads it from the
    page cache the moment the grading is answered and keeps the score in its store; a RESULT lost to
    a power cut is a grading the engine runs again (`regrade_interrupted`), so a sync to the disk
    (ms to tens of ms on a busy journal) would buy nothing on the grading's path."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w") as fh:
        json.dump(result, fh)
    os.replace(tmp, path)


def _load_items(request: dict) -> list[dict]:
    from autorl_tui.catalog.tasks import read_items

    split_path = Path(request["split_path"])
    if not split_path.exists():
        raise GradingError("data", f"split file {split_path} does not exist (materialize the task's splits first)")
    try:
        if split_path.is_file():
            items = read_items(split_path)
        else:   # a folder split (interactive tasks) may index its items in items.jsonl
            index = split_path / "items.jsonl"
            items = read_items(index) if index.exists() else []
    except Exception as exc:  # noqa: BLE001 - any parse failure is a data problem
        raise GradingError("data", f"cannot read split {split_path}: {exc}") from exc
    limit = request.get("limit")
    if limit is not None:
        items = items[: int(limit)]
    return items


def evaluate_request(request: dict, progress: ProgressFile | None = None, stamps: dict | None = None,
                     policy: Any = None) -> dict:
    """Run one evaluation described by REQUEST; returns the RESULT dict (raises GradingError).
    stamps, when given, gets the wall-clock times (`time.time()`) the model started and ended loading.
    policy: the request's model already loaded (the warm grader's spare rehearsing on its own model)."""
    progress = progress or ProgressFile(None)
    stamps = {} if stamps is None else stamps
    t_start = time.perf_counter()
    for key in ("split", "split_path", "model_path", "scorer"):
        if key not in request:
            raise GradingError("internal", f"request lacks `{key}`")
    threads = int(request.get("threads") or 1)
    if str(request.get("device", "cpu")) == "cpu":
        from autorl_tui.grading.malloc_tuning import keep_freed_memory

        keep_freed_memory()      # a generation's activations reuse their pages (grading/malloc_tuning.py)
        # transformers 5 loads the weights on a pool of min(4, cores) threads: past the grading's own
        # thread count, and on the CPU slower than this thread alone (~3 ms of a fresh child's load).
        os.environ["HF_DEACTIVATE_ASYNC_LOAD"] = "1"
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    # OpenMP threads spin while waiting; on a shared machine that can make inference many times slower.
    os.environ.setdefault("GOMP_SPINCOUNT", "1000")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    from transformers.utils import logging as hf_logging

    from autorl_tui.grading.inference import InvalidModel, seed_everything
    from autorl_tui.grading.scorers import get_scorer
    from autorl_tui.grading.types import EvalProtocol, ScorerContext

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    torch.set_num_threads(threads)
    seed = int(request.get("seed") or 0)
    seed_everything(seed, accelerators=str(request.get("device", "cpu")) != "cpu")
    try:
        protocol = EvalProtocol.from_dict(request.get("protocol") or (request.get("task") or {}).get("protocol"))
    except (TypeError, ValueError) as exc:
        raise GradingError("internal", f"bad protocol: {exc}") from exc
    try:
        scorer = get_scorer(request["scorer"], (request.get("task") or {}).get("dir"))
    except (LookupError, ImportError, AttributeError) as exc:   # unknown name, or a task's module:Class that fails
        raise GradingError("scorer", str(exc.args[0]) if exc.args else repr(exc)) from exc
    items = _load_items(request)
    t0 = time.perf_counter()
    stamps["load_start"] = time.time()
    try:
        policy, placement = (policy, {}) if policy is not None else _load_policy(request, dict(
            device=request.get("device", "cpu"), threads=threads, seed=seed, prompt_format=protocol.prompt_format,
            system_prompt=protocol.system_prompt, batch_size=protocol.batch_size,
            template_limits=request.get("template_limits")))
    except InvalidModel as exc:
        raise GradingError("invalid_model", str(exc)) from exc
    load_s = time.perf_counter() - t0
    stamps["loaded"] = time.time()
    timed = _TimedPolicy(policy)
    if hasattr(policy, "on_batch"):
        policy.on_batch = progress.inference
    progress.write(0, len(items), "inference")
    scratch = Path(request.get("scratch_dir") or Path(request["split_path"]).parent / "scratch")
    scratch.mkdir(parents=True, exist_ok=True)
    task = request.get("task") or {}
    ctx = ScorerContext(task_dir=Path(task.get("dir", ".")), split=request["split"],
                        split_path=Path(request["split_path"]), scratch_dir=scratch,
                        options=dict(request.get("scorer_options") or {}), seed=seed,
                        log=lambda msg: print(msg, file=sys.stderr, flush=True), progress=progress.scorer)
    t1 = time.perf_counter()
    try:
        result = scorer.evaluate(timed, items, protocol, ctx)
    except InvalidModel as exc:           # e.g. its chat template loops: the submission's fault
        raise GradingError("invalid_model", str(exc)) from exc
    except (ValueError, KeyError) as exc:
        raise GradingError("data", f"scorer {request['scorer']} rejected the split: {exc}") from exc
    eval_s = time.perf_counter() - t1
    timings = {"load_s": round(load_s, 4), "inference_s": round(timed.seconds, 4),
               "scoring_s": round(max(0.0, eval_s - timed.seconds), 4),
               "total_s": round(time.perf_counter() - t_start, 4)}
    return {"ok": True, "score": result.score, "metrics": {**result.metrics, "context": timed.context.to_dict()},
            "samples": [s.to_dict() for s in result.samples], "timings": timings,
            "grader_version": GRADER_VERSION, "scorer": request["scorer"],
            "scorer_version": getattr(scorer, "version", "?"), "n_items": len(items), "placement": placement}


def _load_policy(request: dict, kwargs: dict) -> tuple[Any, dict]:
    """The request's backend with its placement's settings (grading/placement.py). When vLLM cannot
    start, transformers on the same device, said in the returned placement (`fallback`): never
    silently another backend, never the CPU in place of a GPU. Returns (policy, placement as run)."""
    from autorl_tui.grading.inference import InvalidModel, load_policy

    backend = request.get("backend", "transformers")
    placement = {**dict(request.get("placement") or {}), "backend": backend, "device": kwargs["device"]}
    if backend != "vllm":
        policy = load_policy(backend, request["model_path"], **kwargs)
    else:
        args = {k: placement.get(k) for k in ("tensor_parallel_size", "gpu_memory_utilization", "max_model_len",
                                              "enforce_eager")}
        try:
            policy = load_policy("vllm", request["model_path"], **kwargs, engine_args=args)
        except InvalidModel:
            raise
        except Exception as exc:  # noqa: BLE001 - vLLM not installed, out of memory, unsupported model, ...
            reason = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else ''}"
            print(f"grader: vLLM could not start ({reason}); grading with transformers on {kwargs['device']}",
                  file=sys.stderr, flush=True)
            _release_gpu_memory()
            policy = load_policy("transformers", request["model_path"], **kwargs)
            placement.update(backend="transformers", fallback={"from": "vllm", "error": reason})
    placement["device_used"] = getattr(policy, "device_used", kwargs["device"])
    if str(placement["device_used"]).startswith("cuda"):
        import torch

        placement["gpu_name"] = torch.cuda.get_device_name(0)
    return policy, placement


def _release_gpu_memory() -> None:
    import gc

    gc.collect()
    try:
        import torch

        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001 - best effort before the fallback loads its own copy
        pass


def _if_out_of_memory(result: dict, exc: BaseException) -> None:
    """An allocation that failed (at the memory limit, see grading/memory_limit.py) is said as such."""
    from autorl_tui.grading import memory_limit

    if memory_limit.looks_like_oom(exc):
        result.update(error=memory_limit.message(memory_limit.current(), f"{type(exc).__name__}: {str(exc)[:200]}"),
                      error_kind="memory")


def main(argv: list[str] | None = None, stamps: dict | None = None) -> int:
    """stamps (the warm grader's child passes its own): wall-clock times of the grading's phases,
    returned in RESULT as `stamps` with those of this worker added (docs/grading.md)."""
    argv = sys.argv[1:] if argv is None else argv
    stamps = dict(stamps or {})
    if len(argv) != 2:
        print("usage: python -m autorl_tui.grading.worker REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    request_path, result_path = Path(argv[0]), Path(argv[1])
    t_start = time.perf_counter()
    try:
        try:
            request = json.loads(request_path.read_text())
        except (OSError, ValueError) as exc:
            raise GradingError("internal", f"cannot read request {request_path}: {exc}") from exc
        stamps["request_read"] = time.time()
        result = evaluate_request(request, ProgressFile(result_path.parent / PROGRESS_FILE), stamps)
    except GradingError as exc:
        result = {"ok": False, "error": str(exc), "error_kind": exc.kind,
                  "traceback": traceback.format_exc() if exc.kind == "internal" else None}
        _if_out_of_memory(result, exc)
    except Exception as exc:  # noqa: BLE001 - reported, never lost
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "error_kind": "internal",
                  "traceback": traceback.format_exc()}
        _if_out_of_memory(result, exc)
    if not result["ok"]:
        result.update(grader_version=GRADER_VERSION, timings={"total_s": round(time.perf_counter() - t_start, 4)})
    stamps["evaluated"] = time.time()
    result["stamps"] = stamps
    try:
        write_result(result_path, result)
    except OSError as exc:
        print(f"grader worker: cannot write {result_path}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

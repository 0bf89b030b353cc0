"""Inference backends implementing the `Policy` protocol of `grading/types.py`.

- `TransformersPolicy`: Hugging Face `transformers`, CPU or GPU, batched generation with left
  padding. Greedy at temperature 0, sampling otherwise; n samples per prompt; stop strings.
- `VLLMPolicy`: the GPU backend; imports vllm lazily (an optional extra, not installable on a
  CPU-only machine, so it is not exercised by the tests here).

Submitted models are untrusted: they are always loaded with `trust_remote_code=False` and
`local_files_only=True` (no hub look-ups, no code from the model folder).
"""

from __future__ import annotations

import functools
import json
import os
import random
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from autorl_tui import registry
from autorl_tui.grading import context_budget
from autorl_tui.grading.stop_criteria import stop_when_written
from autorl_tui.grading.time_limits import RenderBudget, TimeLimitExceeded
from autorl_tui.grading.types import Completion


class InvalidModel(Exception):
    """The model folder cannot be loaded as a causal LM; the message says why."""


class ChatTemplateError(InvalidModel):
    """The submitted tokenizer's chat template failed or ran past its time limit."""


def seed_everything(seed: int, accelerators: bool = True) -> None:
    """Python's, numpy's and torch's generators. accelerators=False (a CPU grading: no GPU is
    visible to it) seeds torch's CPU generator alone, which is all `torch.manual_seed` seeds there
    too: it would also queue a seeding of CUDA's generators for when CUDA starts, and each queued
    call records its Python stack, source lines read from disk (~20 ms in a fresh grading child,
    docs/grading.md "Where a warm grading's time goes")."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % (2**32))
    if accelerators:
        torch.manual_seed(seed)
    else:
        torch.random.default_generator.manual_seed(seed)


INIT_FUNCTIONS = ("uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_", "dirac_",
                  "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_",
                  "sparse_")


@contextmanager
def meta_init_skipped():
    """While it lasts, `torch.nn.init`'s functions return a tensor on the meta device untouched.
    transformers builds a model's modules on the meta device and then loads the weights over them;
    each module's own initialisation (nn.Linear's kaiming_uniform_, nn.Embedding's normal_) runs on
    tensors that hold no values, through torch's Python decompositions: ~4 ms of a tiny model's
    ~20 ms load, ~1/4 of its module construction. On meta that is an exact no-op (no values are
    written, no generator is drawn from), so skipping it changes nothing; a tensor anywhere else
    (weights a checkpoint lacks, initialised after the load) goes to the function as before."""
    import torch.nn.init as init

    originals = {name: getattr(init, name) for name in INIT_FUNCTIONS if hasattr(init, name)}

    def skipping(original):
        @functools.wraps(original)
        def init_unless_meta(tensor, *args, **kwargs):
            return tensor if getattr(tensor, "is_meta", False) else original(tensor, *args, **kwargs)
        return init_unless_meta

    for name, original in originals.items():
        setattr(init, name, skipping(original))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(init, name, original)


def check_model_dir(path: Path) -> None:
    """Clear errors for the usual ways a submitted folder is not a loadable full model."""
    if not path.exists():
        raise InvalidModel(f"model folder {path} does not exist")
    if not path.is_dir():
        raise InvalidModel(f"model path {path} is a file; give the folder that holds config.json")
    if (path / "adapter_config.json").exists() and not (path / "config.json").exists():
        raise InvalidModel(f"{path} holds only a LoRA adapter (adapter_config.json); merge it into the base "
                           f"model first (peft: model.merge_and_unload(), then save_pretrained)")
    if not (path / "config.json").exists():
        raise InvalidModel(f"{path} has no config.json; save the model with save_pretrained()")
    if not (any(path.glob("*.safetensors")) or any(path.glob("pytorch_model*.bin"))):
        raise InvalidModel(f"{path} has no weights (*.safetensors or pytorch_model*.bin); "
                           f"save the model with save_pretrained()")
    if not any((path / f).exists() for f in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        raise InvalidModel(f"{path} has no tokenizer files; save the tokenizer beside the model "
                           f"(tokenizer.save_pretrained(same folder))")
    refuse_custom_code(path)


def refuse_custom_code(path: Path) -> None:
    """A submission's code never runs: `auto_map` (classes from .py files in the folder) is refused
    outright rather than silently ignored, so the author learns the model is not what they trained."""
    for name in ("config.json", "tokenizer_config.json"):
        try:
            data = json.loads((path / name).read_text())
        except (OSError, ValueError):
            continue       # absent, or unreadable: the loader reports it
        if isinstance(data, dict) and data.get("auto_map"):
            raise InvalidModel(f"{path / name} has `auto_map` (custom model code: "
                               f"{', '.join(sorted(map(str, data['auto_map'])))}); the grader never runs code from "
                               f"a submission: save a standard transformers architecture and remove auto_map")


def _render(tokenizer, prompt: Any, prompt_format: str, system_prompt: str | None,
            budget: RenderBudget | None = None) -> str:
    if prompt_format == "plain":
        if not isinstance(prompt, str):
            raise ValueError("prompt_format 'plain' needs string prompts")
        return prompt
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    if system_prompt and not any(m.get("role") == "system" for m in messages):
        messages = [{"role": "system", "content": system_prompt}] + messages
    budget = budget or RenderBudget(None, None)
    fix = "fix or remove chat_template in the submitted tokenizer_config.json (or save the base model's tokenizer)"
    try:
        with budget.call():
            text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except MemoryError:
        raise            # the grader's memory limit (grading/memory_limit.py), not a broken template
    except TimeLimitExceeded:
        raise ChatTemplateError(
            f"the tokenizer's chat template ran past its time limit ({budget.per_call_s}s per prompt, "
            f"{budget.total_s}s in all; {budget.spent_s:.1f}s spent): {fix}") from None
    except Exception as exc:  # noqa: BLE001 - any failure of the submitted template (RecursionError included)
        raise ChatTemplateError(f"the tokenizer's chat template failed to render: {type(exc).__name__}: "
                                f"{str(exc)[:300]}: {fix}") from None
    if not isinstance(text, str):
        raise ChatTemplateError(f"the tokenizer's chat template rendered {type(text).__name__}, not text: {fix}")
    return text


def _cut_at_stop(text: str, stop: list[str] | None) -> tuple[str, bool]:
    if not stop:
        return text, False
    cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def protocol_generation_config(tokenizer, *, max_new_tokens: int = 64, n: int = 1, temperature: float = 0.0,
                               top_p: float = 1.0):
    """Every decoding setting of a grading, from the protocol alone (issue 31): a fresh
    GenerationConfig, so each field the protocol does not name keeps the library's neutral default —
    one beam and one beam group, no repetition, length or diversity penalty, no n-gram ban, no bad or
    forced words, no forced BOS/EOS, no suppressed tokens, no sequence bias, no minimum length, no
    time limit, no watermark, no assistant model — whatever the submission's generation_config.json
    or config.json say. EOS and padding come from the tokenizer; stop strings are cut by the caller."""
    from transformers import GenerationConfig

    greedy = temperature <= 0
    return GenerationConfig(
        max_new_tokens=max_new_tokens, min_new_tokens=None, min_length=0, num_return_sequences=n,
        do_sample=not greedy, temperature=None if greedy else temperature, top_p=None if greedy else top_p,
        top_k=None if greedy else 0, num_beams=1, num_beam_groups=1, repetition_penalty=1.0, length_penalty=1.0,
        no_repeat_ngram_size=0, bad_words_ids=None, forced_bos_token_id=None, forced_eos_token_id=None,
        suppress_tokens=None, begin_suppress_tokens=None, sequence_bias=None, stop_strings=None,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id)


class TransformersPolicy:
    """Batched generation with a Hugging Face causal LM."""

    def __init__(self, model_path: str | Path, device: str = "cpu", threads: int | None = None, seed: int = 0,
                 prompt_format: str = "chat", system_prompt: str | None = None, batch_size: int = 64,
                 template_limits: dict | None = None):
        import torch

        if threads:
            torch.set_num_threads(int(threads))
        self.path = Path(model_path)
        self.device = device
        self.seed = seed
        self.prompt_format = prompt_format
        self.system_prompt = system_prompt
        self.batch_size = max(1, int(batch_size))
        self.render_budget = RenderBudget.from_dict(template_limits)
        check_model_dir(self.path)
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        try:
            # The config parsed once, for both: each loader would parse it again (~3 ms each on the
            # tiny model, most of it formatting the config's repr for a log line nobody reads).
            config = AutoConfig.from_pretrained(self.path, trust_remote_code=False, local_files_only=True)
            self.tokenizer = AutoTokenizer.from_pretrained(self.path, config=config, trust_remote_code=False,
                                                           local_files_only=True)
            # .bin weights are pickles: weights_only unpickles tensors and plain data, never calls code.
            with meta_init_skipped():
                self.model = AutoModelForCausalLM.from_pretrained(self.path, config=config, trust_remote_code=False,
                                                                  local_files_only=True, weights_only=True)
        except Exception as exc:  # noqa: BLE001 - e.g. UnpicklingError of a .bin carrying code
            raise InvalidModel(f"cannot load {self.path} as a causal LM with transformers "
                               f"(trust_remote_code is off): {exc}") from exc
        self.model.to(device)
        self.model.eval()
        self.device_used = str(next(self.model.parameters()).device)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        # The submission's generation_config.json (beams, penalties, biases, forced tokens, ...) is
        # dropped: transformers fills every field a call leaves unset from model.generation_config.
        self.model.generation_config = protocol_generation_config(self.tokenizer)
        if prompt_format == "chat" and not getattr(self.tokenizer, "chat_template", None):
            raise InvalidModel(f"{self.path}: the task uses chat prompts but the tokenizer has no chat_template")
        self.max_positions = getattr(self.model.config, "max_position_embeddings", None)
        self.on_batch: Any = None      # optional callback(done, total) after each generated batch

    def generate(self, prompts: list[Any], *, n: int = 1, temperature: float = 0.0, top_p: float = 1.0,
                 max_tokens: int = 64, stop: list[str] | None = None) -> list[list[Completion]]:
        """Each prompt gets its own budget (context_budget.budget: max_tokens, capped so that
        prompt + output fits the model's positions) whatever shares its batch: prompts are batched
        only with prompts of the same budget. A prompt that leaves no room is refused, alone."""
        import torch

        texts = [_render(self.tokenizer, p, self.prompt_format, self.system_prompt, self.render_budget)
                 for p in prompts]
        greedy = temperature <= 0
        if greedy:
            n_gen = 1          # greedy samples are identical: generate once, repeat
        else:
            n_gen = n
            torch.manual_seed(self.seed)
        rows = self.tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
        results: list[list[Completion] | None] = [None] * len(texts)
        groups: dict[int, list[int]] = {}
        for i, ids in enumerate(rows):
            why = context_budget.refusal(len(ids), self.max_positions)
            if why is not None:
                results[i] = context_budget.refused_completions(why, len(ids), n)
            else:
                groups.setdefault(context_budget.budget(len(ids), max_tokens, self.max_positions), []).append(i)
        done = len(texts) - sum(len(g) for g in groups.values())
        per_batch = max(1, self.batch_size // n_gen)
        for budget, members in groups.items():
            for start in range(0, len(members), per_batch):
                chunk = members[start:start + per_batch]
                for i, samples in zip(chunk, self._generate_rows([rows[i] for i in chunk], budget, n_gen,
                                                                  temperature, top_p, stop)):
                    results[i] = samples * n if greedy else samples
                done += len(chunk)
                if self.on_batch is not None:
                    self.on_batch(done, len(texts))
        return [r if r is not None else [] for r in results]

    def _generate_rows(self, rows: list[list[int]], budget: int, n_gen: int, temperature: float, top_p: float,
                       stop: list[str] | None) -> list[list[Completion]]:
        """One batched generate call over token rows of the same budget, left-padded."""
        import torch

        pad = self.tokenizer.pad_token_id
        width = max(len(r) for r in rows)
        input_ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], device=self.device)
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], device=self.device)
        config = protocol_generation_config(self.tokenizer, max_new_tokens=budget, n=n_gen,
                                            temperature=temperature, top_p=top_p)
        eos = self.tokenizer.eos_token_id
        extra: dict[str, Any] = {}
        if stop and n_gen == 1 and temperature <= 0:
            # Greedy rows end at their stop string (sampled ones run on: stopping early would shift
            # the random draws of the batches after this one, and so their samples).
            decode = partial(self.tokenizer.decode, skip_special_tokens=True)
            extra["stopping_criteria"] = stop_when_written(decode, stop, width,
                                                           {t for t in (pad, eos) if t is not None})
        with torch.no_grad():
            out = self.model.generate(input_ids=input_ids, attention_mask=mask, generation_config=config, **extra)
        new = out[:, width:]
        per_row = []
        for row_i, row in enumerate(rows):
            samples = []
            for j in range(n_gen):
                ids = new[row_i * n_gen + j].tolist()
                finished = eos in ids
                if finished:
                    ids = ids[: ids.index(eos)]
                ids = [t for t in ids if t != pad]
                text = self.tokenizer.decode(ids, skip_special_tokens=True)
                text, stopped = _cut_at_stop(text, stop)
                reason = "stop" if (finished or stopped or len(ids) < budget) else "length"
                samples.append(Completion(text=text, tokens=len(ids), finish_reason=reason, budget=budget,
                                          prompt_tokens=len(row)))
            per_row.append(samples)
        return per_row


# One vLLM engine per device group in a long-lived grading process: {CUDA_VISIBLE_DEVICES: (engine, signature)}.
_VLLM_ENGINES: dict[str, tuple[Any, tuple]] = {}
# What must match for new weights to be loaded into a running engine: the architecture and its
# shapes (the engine's memory plan and kernels depend on them) and the tokenizer (the engine tokenizes).
_SIGNATURE_KEYS = ("architectures", "model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
                   "num_attention_heads", "num_key_value_heads", "vocab_size", "max_position_embeddings",
                   "torch_dtype", "dtype", "tie_word_embeddings", "rope_scaling", "quantization_config")


def vllm_signature(model_path: Path) -> tuple:
    import hashlib

    config = json.loads((model_path / "config.json").read_text())
    tok = hashlib.sha256()
    for name in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json"):
        if (model_path / name).exists():
            tok.update(name.encode() + b"\0" + (model_path / name).read_bytes())
    return tuple(json.dumps(config.get(k), sort_keys=True) for k in _SIGNATURE_KEYS) + (tok.hexdigest(),)


def warm_vllm_engine(model_path: Path, seed: int, make_engine=None,
                     engine_args: dict | None = None) -> tuple[Any, str]:
    """The device group's engine with model_path's weights: the running engine with its weights
    reloaded in place when the signature matches, else a fresh engine (the old one dropped).
    engine_args: vllm.LLM's settings from the grading's placement (grading/placement.py).
    Returns (engine, "reloaded" | "fresh")."""
    group = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    engine_args = {k: v for k, v in (engine_args or {}).items() if v is not None}
    signature = vllm_signature(model_path) + (json.dumps(engine_args, sort_keys=True),)
    cached = _VLLM_ENGINES.get(group)
    if cached and cached[1] == signature:
        llm = cached[0]
        try:
            llm.collective_rpc("update_config", args=({"model_config": {"model": str(model_path)}},))
            llm.collective_rpc("reload_weights")
            return llm, "reloaded"
        except Exception:  # noqa: BLE001 - any failure to swap: a fresh engine, never stale weights
            pass
    _VLLM_ENGINES.pop(group, None)
    if cached:
        del cached
        import gc

        gc.collect()
    if make_engine is None:
        from vllm import LLM

        def make_engine():
            return LLM(model=str(model_path), trust_remote_code=False, seed=seed, **engine_args)
    llm = make_engine()
    _VLLM_ENGINES[group] = (llm, signature)
    return llm, "fresh"


def vllm_max_model_len(llm) -> int | None:
    """The engine's context (`max_model_len`), where this vLLM version keeps it."""
    for holder in (getattr(llm, "llm_engine", None), llm):
        config = getattr(holder, "model_config", None)
        if config is not None and getattr(config, "max_model_len", None):
            return int(config.max_model_len)
    return None


class VLLMPolicy:
    """vLLM backend (GPU). Same protocol, same prompt rendering. Untested on CPU-only machines.
    In a long-lived process the device group's engine is kept and reloaded in place
    (`warm_vllm_engine`)."""

    def __init__(self, model_path: str | Path, device: str = "cuda", threads: int | None = None, seed: int = 0,
                 prompt_format: str = "chat", system_prompt: str | None = None, batch_size: int = 64,
                 template_limits: dict | None = None, engine_args: dict | None = None):
        try:
            import vllm  # noqa: F401
        except ImportError as exc:
            raise RuntimeError("the vllm backend needs the optional `gpu` extra (pip install 'autorl-tui[gpu]') "
                               "and an NVIDIA GPU; use backend transformers otherwise") from exc
        check_model_dir(Path(model_path))
        self.llm, self.load_mode = warm_vllm_engine(Path(model_path), seed, engine_args=engine_args)
        self.device_used = "cuda"
        self.tokenizer = self.llm.get_tokenizer()
        self.max_positions = vllm_max_model_len(self.llm)
        self.prompt_format = prompt_format
        self.system_prompt = system_prompt
        self.render_budget = RenderBudget.from_dict(template_limits)

    def generate(self, prompts: list[Any], *, n: int = 1, temperature: float = 0.0, top_p: float = 1.0,
                 max_tokens: int = 64, stop: list[str] | None = None) -> list[list[Completion]]:
        from vllm import SamplingParams

        texts = [_render(self.tokenizer, p, self.prompt_format, self.system_prompt, self.render_budget)
                 for p in prompts]
        params = SamplingParams(n=n, temperature=temperature, top_p=top_p, max_tokens=max_tokens, stop=stop)
        # vLLM refuses a prompt that leaves no room (a ValueError that would end the whole call):
        # such a prompt is refused here, alone, counted as vLLM counts it (a text prompt is encoded
        # with the tokenizer's special tokens); the others go to vLLM, which caps each by itself.
        limit = self.max_positions
        lengths = [len(self.tokenizer.encode(t)) for t in texts]
        results: list[list[Completion] | None] = [None] * len(texts)
        for i, length in enumerate(lengths):
            why = context_budget.refusal(length, limit)
            if why is not None:
                results[i] = context_budget.refused_completions(why, length, n)
        runnable = [i for i, r in enumerate(results) if r is None]
        outputs = self.llm.generate([texts[i] for i in runnable], params) if runnable else []
        for i, o in zip(runnable, outputs):
            results[i] = [Completion(text=c.text, tokens=len(c.token_ids),
                                     finish_reason="length" if c.finish_reason == "length" else "stop",
                                     budget=context_budget.budget(lengths[i], max_tokens, limit),
                                     prompt_tokens=lengths[i]) for c in o.outputs]
        return [r if r is not None else [] for r in results]


def load_policy(backend: str, model_path: str | Path, **kwargs) -> Any:
    """Backends are plugins (`autorl_tui/registry.py`, kind `inference_backends`): a class taking
    (model_path, **kwargs) and implementing the `Policy` protocol."""
    if backend not in registry.entries("inference_backends"):
        raise ValueError(f"unknown inference backend {backend!r}; "
                         f"known: {', '.join(registry.names('inference_backends'))}")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    return registry.load("inference_backends", backend)(model_path, **kwargs)

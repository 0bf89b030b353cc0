"""Built-in base models built on this machine with no downloads: what they share.

Each built-in model (registry kind `models`; the `tiny` model of the arith task, `tiny-alfworld`, `tiny-dsqa`)
is built into a folder by a deterministic function and written atomically: built in a temporary
folder beside the target and renamed into place, under a file lock, so a reader never sees half a
model and concurrent builders build it once. They share the ChatML chat template and the build
record (BUILD_INFO) that says how a folder was built.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

BUILD_INFO = "autorl_tui_build.json"
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
)
SPECIAL_TOKENS = ["<|pad|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def chatml(messages: list[dict]) -> str:
    """What CHAT_TEMPLATE renders (a plain format string is 10x faster than Jinja for a corpus)."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


def weights_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(Path(folder).glob("*.safetensors")):
        h.update(f.read_bytes())
    return h.hexdigest()


def built_version(folder: Path) -> str | None:
    """The version a folder's build record names (None: no readable record)."""
    import json
    try:
        info = json.loads((folder / BUILD_INFO).read_text())
    except (OSError, ValueError):
        return None
    version = info.get("version", info.get("tiny_version")) if isinstance(info, dict) else None
    return None if version is None else str(version)


def is_built(folder: Path, version: str | None = None) -> bool:
    """A complete build is there (and, given `version`, one of that version: a folder an older
    build left is built again, not reused with another tokenizer or shape)."""
    if not ((folder / BUILD_INFO).exists() and any(folder.glob("*.safetensors"))):
        return False
    return version is None or built_version(folder) == str(version)


@contextmanager
def _build_lock(folder: Path):
    lock_path = folder.parent / f".{folder.name}.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)     # a concurrent builder waits, then finds the model built
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def build_atomically(out_dir: Path | str, build_into, force: bool = False, version: str | None = None) -> Path:
    """Build a model folder with `build_into(tmp_folder)` unless it is already there in `version`
    (or `force`).

    Built in a temporary folder beside the target and renamed into place, under a file lock, so a
    reader never sees half a model and concurrent builders build it once."""
    out = Path(out_dir).expanduser().absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock(out):
        if is_built(out, version) and not force:
            return out
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
        try:
            build_into(tmp)
            os.chmod(tmp, 0o755)
            for f in tmp.rglob("*"):   # readable by the sandboxed grader's uid (safetensors writes 0600)
                os.chmod(f, 0o755 if f.is_dir() else 0o644)
            if out.exists():
                trash = out.parent / f".{out.name}.old-{os.getpid()}"
                os.rename(out, trash)
                os.rename(tmp, out)
                shutil.rmtree(trash, ignore_errors=True)
            else:
                os.rename(tmp, out)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return out


def save_untrained_llama(folder: Path, tok, *, name: str, version: str, seed: int, shape: tuple[int, int, int, int],
                         max_positions: int, max_new_tokens: int = 32, started: float | None = None) -> dict:
    """A randomly initialized (seeded) Llama-shaped model over the tokenizer `tok`, saved with the
    tokenizer and its build record into `folder`: the built-in models of the interactive tasks,
    whose baseline is the floor and which learn everything from the run's own post-training.
    `shape` is (hidden, layers, attention heads, key/value heads)."""
    import json
    import time

    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig, LlamaConfig

    t0 = time.time() if started is None else started
    hidden, layers, heads, kv_heads = shape
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=3 * hidden, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=max_positions,
                      rope_theta=10000.0, tie_word_embeddings=True, initializer_range=0.02, bos_token_id=None,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, dtype="float32")
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg)
    model.generation_config = GenerationConfig(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                                               bos_token_id=None, do_sample=False, max_new_tokens=max_new_tokens)
    model.save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)
    info = {"name": name, "version": version, "seed": seed, "params": sum(p.numel() for p in model.parameters()),
            "vocab": len(tok), "max_positions": max_positions, "pretrained": False,
            "build_s": round(time.time() - t0, 2), "torch": torch.__version__}
    (Path(folder) / BUILD_INFO).write_text(json.dumps(info, indent=1))
    return info

"""Submission intake: validate the folder an agent submitted, snapshot it into harness-owned
storage and hash it. The grader only ever reads the snapshot."""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "model*.safetensors")
MAX_SNAPSHOT_BYTES = 200 * 1024**3


class SubmissionRejected(Exception):
    """The submission is not acceptable; the message tells the agent what to fix. HTTP 400."""

    def __init__(self, message: str, code: str = "invalid"):
        super().__init__(message)
        self.code = code


@dataclass
class Snapshot:
    path: Path
    content_hash: str
    n_files: int
    total_bytes: int


def resolve_submission_path(workspace: Path, model_path) -> Path:
    """The real folder the agent means, which must lie inside workspace/output/ with no symlink
    leading out of it."""
    if not isinstance(model_path, str) or not model_path.strip():
        raise SubmissionRejected('give "model_path": a folder inside output/, e.g. {"model_path": "output/v1"}',
                                 "bad_request")
    output = (workspace / "output").resolve()
    given = Path(model_path)
    candidate = given if given.is_absolute() else workspace / given
    # Judge the path as written first (so "output/../models/x" is refused even if it exists)...
    lexical = Path(os.path.normpath(candidate))
    if not _inside(lexical, workspace / "output") and not _inside(lexical, output):
        raise SubmissionRejected(f"{model_path!r} is outside output/: copy or save the checkpoint under output/ "
                                 f"(e.g. output/v1) and submit that", "outside_output")
    # ...then where it really leads.
    real = candidate.resolve()
    if not _inside(real, output):
        raise SubmissionRejected(f"{model_path!r} leads outside output/ through a symlink: submit a real folder "
                                 f"under output/", "symlink_out")
    if not real.exists():
        raise SubmissionRejected(f"{model_path!r} does not exist", "missing")
    if not real.is_dir():
        raise SubmissionRejected(f"{model_path!r} is a file: submit the checkpoint folder (save_pretrained output)",
                                 "not_a_folder")
    for dirpath, dirnames, filenames in os.walk(real):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if p.is_symlink() and not _inside(p.resolve(), output):
                raise SubmissionRejected(f"{p.relative_to(workspace)} is a symlink leading outside output/ "
                                         f"(to {os.readlink(p)}): copy the file instead", "symlink_out")
    return real


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def check_model_folder(folder: Path) -> None:
    files = [p for p in folder.rglob("*") if p.is_file()]
    if not files:
        raise SubmissionRejected(f"{folder.name}/ is empty: save a full model there with save_pretrained()", "empty")
    has_config = (folder / "config.json").exists()
    has_weights = any(any(folder.glob(pattern)) for pattern in WEIGHT_PATTERNS)
    if (folder / "adapter_config.json").exists() and not (has_config and has_weights):
        raise SubmissionRejected(
            f"{folder.name}/ holds a LoRA adapter only: merge it first (model = model.merge_and_unload(); "
            f"model.save_pretrained(...); tokenizer.save_pretrained(...)) and submit the merged folder", "lora_only")
    if not has_config:
        raise SubmissionRejected(f"{folder.name}/ has no config.json: save the model with save_pretrained()",
                                 "missing_config")
    if not has_weights:
        raise SubmissionRejected(f"{folder.name}/ has no weights (*.safetensors or pytorch_model*.bin)",
                                 "missing_weights")
    if not any((folder / n).exists() for n in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        raise SubmissionRejected(f"{folder.name}/ has no tokenizer: also call tokenizer.save_pretrained() there",
                                 "missing_tokenizer")


def snapshot_folder(src: Path, dst: Path) -> Snapshot:
    """Copy src into dst (harness-owned) and hash the content: sha256 over sorted (path, file hash)."""
    tmp = dst.with_name(dst.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    outer = hashlib.sha256()
    total = 0
    entries = []
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        rel = path.relative_to(src)
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        h = hashlib.sha256()
        with open(path, "rb") as fin, open(target, "wb") as fout:
            while chunk := fin.read(1 << 20):
                h.update(chunk)
                fout.write(chunk)
                total += len(chunk)
                if total > MAX_SNAPSHOT_BYTES:
                    shutil.rmtree(tmp)
                    raise SubmissionRejected("the checkpoint is larger than the snapshot limit", "too_large")
        entries.append((str(rel), h.hexdigest()))
    for rel, digest in entries:
        outer.update(f"{rel}\0{digest}\n".encode())
    if dst.exists():
        shutil.rmtree(dst)
    os.replace(tmp, dst)
    for dirpath, _d, filenames in os.walk(dst):
        for name in filenames:
            os.chmod(Path(dirpath) / name, 0o444)   # read-only; readable by the sandboxed grader's uid
    return Snapshot(path=dst, content_hash=outer.hexdigest(), n_files=len(entries), total_bytes=total)

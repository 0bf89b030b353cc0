"""Submission intake: validate the folder an agent submitted, snapshot it into harness-owned
storage and hash it. The grader only ever reads the snapshot.

The folder is held by descriptor (engine/submitted_folder.py): every check and every read goes
through the descriptors opened once, never through a path the agent could change in between."""

from __future__ import annotations

import hashlib
import os
import fnmatch
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

# SubmissionRejected and check_model_path_text are re-exported: the desk and the API take them from here
from autorl_tui.engine.submission_errors import SubmissionRejected, check_model_path_text  # noqa: F401
from autorl_tui.engine.submitted_folder import SubmittedFolder, hold_folder, open_submission

WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "model*.safetensors")
# A submission may be at most SIZE_FACTOR times the base model's size (the card's
# `submission_cap: {size_factor: F}` changes F), and never less than MIN_SNAPSHOT_CAP_BYTES:
# a full fine-tune saved in fp32 from a bf16 base is 2x, plus tokenizer and config files.
DEFAULT_SIZE_FACTOR = 4.0
MIN_SNAPSHOT_CAP_BYTES = 1024**3


@dataclass
class Snapshot:
    path: Path
    content_hash: str
    n_files: int
    total_bytes: int


def resolve_submission_path(workspace: Path, model_path) -> str:
    """Check that model_path names a real folder under workspace/output/ reached without a link and
    holding no link (the engine's rule, for a stand-in desk); returns its workspace-relative path."""
    with open_submission(workspace, model_path) as folder:
        return folder.label


def check_model_folder(folder: SubmittedFolder) -> None:
    """The listing looks like a save_pretrained() folder: config, weights, tokenizer; not an adapter alone."""
    if not folder.entries:
        raise SubmissionRejected(f"{folder.name}/ is empty: save a full model there with save_pretrained()", "empty")
    top = {rel for rel in folder.names() if "/" not in rel}
    has_config = "config.json" in top
    has_weights = any(fnmatch.filter(top, pattern) for pattern in WEIGHT_PATTERNS)
    if "adapter_config.json" in top and not (has_config and has_weights):
        raise SubmissionRejected(
            f"{folder.name}/ holds a LoRA adapter only: merge it first (model = model.merge_and_unload(); "
            f"model.save_pretrained(...); tokenizer.save_pretrained(...)) and submit the merged folder", "lora_only")
    if not has_config:
        raise SubmissionRejected(f"{folder.name}/ has no config.json: save the model with save_pretrained()",
                                 "missing_config")
    if not has_weights:
        raise SubmissionRejected(f"{folder.name}/ has no weights (*.safetensors or pytorch_model*.bin)",
                                 "missing_weights")
    if not top & {"tokenizer.json", "tokenizer_config.json", "tokenizer.model"}:
        raise SubmissionRejected(f"{folder.name}/ has no tokenizer: also call tokenizer.save_pretrained() there",
                                 "missing_tokenizer")


def folder_bytes(folder: "SubmittedFolder | Path") -> tuple[int, int]:
    """(apparent, allocated) bytes of the regular files under folder, as a copy would read them:
    apparent is st_size (what a reader gets), allocated is st_blocks * 512 (what the disk holds;
    far smaller for a sparse file). A Path is a harness-owned folder (the base model)."""
    if not isinstance(folder, SubmittedFolder):
        with hold_folder(folder) as held:
            return folder_bytes(held)
    return sum(e.size for e in folder.entries), sum(e.allocated for e in folder.entries)


def snapshot_cap(base_model_bytes: int, size_factor: float | None = None) -> int:
    factor = DEFAULT_SIZE_FACTOR if size_factor is None else float(size_factor)
    return max(int(factor * base_model_bytes), MIN_SNAPSHOT_CAP_BYTES)


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def check_snapshot_size(folder: "SubmittedFolder | Path", cap: int, base_model_bytes: int,
                        size_factor: float | None = None) -> None:
    """Refuse, before anything is copied, a folder whose apparent or allocated size is over the cap.

    Sparse files count at their apparent size: the snapshot and the grader read every byte of it,
    and a model's files have no holes, so a sparse file is refused rather than copied (expanded)."""
    apparent, allocated = folder_bytes(folder)
    if max(apparent, allocated) > cap:
        factor = DEFAULT_SIZE_FACTOR if size_factor is None else float(size_factor)
        sparse = " (sparse files count at their full size)" if allocated < apparent else ""
        raise SubmissionRejected(
            f"{folder.name}/ holds {_human(apparent)} of files ({apparent} bytes; {_human(allocated)} allocated on "
            f"disk){sparse}, more than this run's snapshot cap of {_human(cap)} ({cap} bytes: {factor:g} x the base "
            f"model's {_human(base_model_bytes)}, at least {_human(MIN_SNAPSHOT_CAP_BYTES)}): submit only the "
            f"save_pretrained() output (config, weights, tokenizer)", "too_large")


READ_CHUNK = 8 << 20
HASH_THREADS = 4
BLOBS = ".blobs"       # beside a run's snapshots: one read-only file per content hash, linked into them

STAT_CACHE = ".statcache.json"  # beside a run's snapshots: what each submitted file's stat was when hashed
RACY_NS = 2_000_000_000         # a file changed this close to its hashing is hashed again (timestamps are coarse)


def _stat_key(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _take_file(folder: SubmittedFolder, rel: str, blobs: Path, budget: _Budget, known: dict,
               seen: dict) -> tuple[str, int]:
    """(sha256, size) of the file at rel, its content in the run's blob store. The file is opened
    once (no link followed, engine/submitted_folder.py) and that descriptor is both hashed and
    copied in one pass, so the blob holds exactly the bytes that were hashed. It is not read at all
    when the open inode's stat (fstat: inode, size, mtime, ctime) equals the run's record from an
    earlier snapshot whose hashing came RACY_NS after its ctime, and that blob is still there: any
    write, truncate, utime or replacement moves ctime, which no unprivileged process can set."""
    import tempfile

    key = f"{folder.label}/{rel}"
    fd = folder.open_file(rel)
    try:
        st = os.fstat(fd)
        entry = known.get(key)
        if (entry and entry["stat"] == _stat_key(st) and st.st_ctime_ns < entry["hashed_at_ns"] - RACY_NS
                and _blob_path(blobs, entry["sha256"]).exists()):
            budget.take(st.st_size)
            seen[key] = entry
            return entry["sha256"], st.st_size
        hashed_at = time.time_ns()
        h = hashlib.sha256()
        n = 0
        out, tmp = tempfile.mkstemp(dir=blobs, prefix=".incoming-")
        try:
            with os.fdopen(fd, "rb", buffering=0, closefd=False) as fin, os.fdopen(out, "wb", buffering=0) as fout:
                buf = memoryview(bytearray(READ_CHUNK))
                while got := fin.readinto(buf):
                    budget.take(got)
                    h.update(buf[:got])          # releases the GIL on large buffers: files go in parallel
                    fout.write(buf[:got])
                    n += got
            digest = h.hexdigest()
            os.chmod(tmp, 0o444)
            final = _blob_path(blobs, digest)
            final.parent.mkdir(exist_ok=True)
            try:
                os.link(tmp, final)              # never replaces a blob already linked into a snapshot
            except FileExistsError:
                pass
        finally:
            Path(tmp).unlink(missing_ok=True)
        after = os.fstat(fd)
        if _stat_key(after) == _stat_key(st) and n == st.st_size:
            seen[key] = {"stat": _stat_key(st), "sha256": digest, "hashed_at_ns": hashed_at}
        return digest, n
    finally:
        os.close(fd)


class _Budget:
    """The bytes read so far against the cap, shared by the hashing threads."""

    def __init__(self, src: SubmittedFolder, max_bytes: int):
        import threading

        self.src, self.max_bytes, self.used, self._lock = src, max_bytes, 0, threading.Lock()

    def take(self, n: int) -> None:
        with self._lock:
            self.used += n
            over = self.used > self.max_bytes
        if over:
            raise SubmissionRejected(f"{self.src.name}/ grew past this run's snapshot cap of "
                                     f"{_human(self.max_bytes)} ({self.max_bytes} bytes) while it was copied: "
                                     f"submit a finished folder", "too_large")


def _read_stat_cache(path: Path) -> dict:
    import json

    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_stat_cache(path: Path, entries: dict) -> None:
    import json

    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(entries))
    os.replace(tmp, path)


def _blob_path(blobs: Path, digest: str) -> Path:
    return blobs / digest[:2] / digest


def snapshot_folder(src: "SubmittedFolder | Path", dst: Path, max_bytes: int) -> Snapshot:
    """Snapshot src into dst (harness-owned, read-only) and hash the content: sha256 over sorted
    (path, file hash). Each file is read once from its own descriptor, hashed and copied into the
    run's blob store (`dst.parent/.blobs`, one read-only file per content), several files at once;
    every file of the snapshot is a hard link to its blob, and a file unchanged since an earlier
    snapshot (its recorded stat) is not read again. Stops and refuses past max_bytes (the agent may
    grow a file after the size check). A Path is a harness-owned folder, held the same way."""
    from concurrent.futures import ThreadPoolExecutor

    if not isinstance(src, SubmittedFolder):
        with hold_folder(src) as held:
            return snapshot_folder(held, dst, max_bytes)
    tmp = dst.with_name(dst.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    blobs = dst.parent / BLOBS
    blobs.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True)
    budget = _Budget(src, max_bytes)
    entries = []
    total = 0
    try:
        rels = [e.rel for e in src.entries]
        known, seen = _read_stat_cache(dst.parent / STAT_CACHE), {}
        with ThreadPoolExecutor(min(HASH_THREADS, max(1, len(rels)))) as pool:
            taken = list(pool.map(lambda rel: _take_file(src, rel, blobs, budget, known, seen), rels))
        for rel, (digest, size) in zip(rels, taken):
            total += size
            if total > max_bytes:
                budget.take(max_bytes + 1)      # the same refusal as while copying
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            blob = _blob_path(blobs, digest)
            try:
                os.link(blob, target)
            except OSError:                     # a filesystem without hard links (or at its link limit)
                shutil.copyfile(blob, target)
                os.chmod(target, 0o444)
            entries.append((rel, digest))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)     # nothing half-written is left in the snapshots
        raise
    outer = hashlib.sha256()
    for rel, digest in entries:
        outer.update(f"{rel}\0{digest}\n".encode())
    _write_stat_cache(dst.parent / STAT_CACHE, {**known, **seen})
    if dst.exists():
        shutil.rmtree(dst)
    os.replace(tmp, dst)
    return Snapshot(path=dst, content_hash=outer.hexdigest(), n_files=len(entries), total_bytes=total)


def take_submission(workspace: Path, model_path, dst: Path, cap: int, base_model_bytes: int,
                    size_factor: float | None = None) -> Snapshot:
    """The whole intake of a submitted folder, on one set of descriptors: open it beneath the
    workspace (no link followed), check it looks like a model, check its size, snapshot it."""
    with open_submission(workspace, model_path) as folder:
        check_model_folder(folder)
        check_snapshot_size(folder, cap, base_model_bytes, size_factor)
        return snapshot_folder(folder, dst, cap)

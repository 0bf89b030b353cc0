"""Submission intake: validate the folder an agent submitted, snapshot it into harness-owned
storage and hash it. The grader only ever reads the snapshot."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path

WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "model*.safetensors")
# A submission may be at most SIZE_FACTOR times the base model's size (the card's
# `submission_cap: {size_factor: F}` changes F), and never less than MIN_SNAPSHOT_CAP_BYTES:
# a full fine-tune saved in fp32 from a bf16 base is 2x, plus tokenizer and config files.
DEFAULT_SIZE_FACTOR = 4.0
MIN_SNAPSHOT_CAP_BYTES = 1024**3


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


MAX_PATH_BYTES = 4096          # PATH_MAX
MAX_COMPONENT_BYTES = 255      # NAME_MAX


def check_model_path_text(model_path) -> None:
    """What the agent sent can name a file at all: a non-empty UTF-8 string without NUL or control
    characters, within the kernel's length limits. Checked before anything is recorded."""
    if not isinstance(model_path, str) or not model_path.strip():
        raise SubmissionRejected('give "model_path": a folder inside output/, e.g. {"model_path": "output/v1"}',
                                 "bad_request")
    shown = ascii(model_path[:80])
    try:
        encoded = model_path.encode("utf-8")
    except UnicodeEncodeError:
        raise SubmissionRejected(f"model_path {shown} is not valid Unicode (a lone surrogate escape such as "
                                 f"\\ud800): name the folder with plain characters", "bad_path") from None
    if any(ord(c) < 32 or ord(c) == 127 for c in model_path):
        raise SubmissionRejected(f"model_path {shown} holds a NUL or control character: name the folder with "
                                 f"printable characters, e.g. output/v1", "bad_path")
    if len(encoded) > MAX_PATH_BYTES:
        raise SubmissionRejected(f"model_path is {len(encoded)} bytes long (the limit is {MAX_PATH_BYTES}): use a "
                                 f"shorter path such as output/v1", "bad_path")
    long = [part for part in encoded.split(b"/") if len(part) > MAX_COMPONENT_BYTES]
    if long:
        raise SubmissionRejected(f"a folder name in model_path is {len(long[0])} bytes long (the limit is "
                                 f"{MAX_COMPONENT_BYTES} per name): use shorter names, e.g. output/v1", "bad_path")


def resolve_submission_path(workspace: Path, model_path) -> Path:
    """The real folder the agent means, which must lie inside workspace/output/ with no symlink
    leading out of it."""
    check_model_path_text(model_path)
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


def folder_bytes(folder: Path) -> tuple[int, int]:
    """(apparent, allocated) bytes of the regular files under folder, as a copy would read them:
    apparent is st_size (what a reader gets), allocated is st_blocks * 512 (what the disk holds;
    far smaller for a sparse file)."""
    apparent = allocated = 0
    for path in folder.rglob("*"):
        try:
            st = path.stat()
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            apparent += st.st_size
            allocated += st.st_blocks * 512
    return apparent, allocated


def snapshot_cap(base_model_bytes: int, size_factor: float | None = None) -> int:
    factor = DEFAULT_SIZE_FACTOR if size_factor is None else float(size_factor)
    return max(int(factor * base_model_bytes), MIN_SNAPSHOT_CAP_BYTES)


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def check_snapshot_size(folder: Path, cap: int, base_model_bytes: int, size_factor: float | None = None) -> None:
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


def _open_regular_file(path: Path):
    """Open for reading without blocking on a FIFO the agent swapped in after the folder was listed."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SubmissionRejected(f"{path.name} is not a regular file (a FIFO, socket or device): submit plain files",
                                 "not_a_file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


READ_CHUNK = 8 << 20
HASH_THREADS = 4
BLOBS = ".blobs"       # beside a run's snapshots: one read-only file per content hash, linked into them


STAT_CACHE = ".statcache.json"  # beside a run's snapshots: what each submitted file's stat was when hashed
RACY_NS = 2_000_000_000         # a file changed this close to its hashing is hashed again (timestamps are coarse)


def _stat_key(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _hash_file(path: Path, budget: "_Budget", known: dict, seen: dict) -> tuple[str, int]:
    """(sha256, size) of path. A file whose inode, size, mtime and ctime are those recorded when an
    earlier snapshot of the run hashed it, and whose ctime was then already RACY_NS old, is not read
    again: any write, truncate, utime or replacement moves ctime, which no unprivileged process
    can set."""
    st = os.stat(path)
    entry = known.get(str(path))
    if entry and entry["stat"] == _stat_key(st) and st.st_ctime_ns < entry["hashed_at_ns"] - RACY_NS:
        budget.take(st.st_size)
        seen[str(path)] = entry
        return entry["sha256"], st.st_size
    hashed_at = time.time_ns()
    h = hashlib.sha256()
    n = 0
    with _open_regular_file(path) as fin:
        while chunk := fin.read(READ_CHUNK):
            h.update(chunk)              # releases the GIL on large buffers: files hash in parallel
            n += len(chunk)
            budget.take(len(chunk))
        after = os.fstat(fin.fileno())
    if _stat_key(after) == _stat_key(st) and after.st_size == n:
        seen[str(path)] = {"stat": _stat_key(st), "sha256": h.hexdigest(), "hashed_at_ns": hashed_at}
    return h.hexdigest(), n


class _Budget:
    """The bytes read so far against the cap, shared by the hashing threads."""

    def __init__(self, src: Path, max_bytes: int):
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


def _store_blob(path: Path, blobs: Path, hashed: dict | None = None) -> tuple[str, int]:
    """Copy path into the blob store; returns (hash, size). The hash is of the bytes actually
    copied (the agent may change the file after it was first hashed), computed over the copy
    unless `hashed` (this snapshot's hashing of it) shows the file has not changed since:
    same stat before and after the copy, and a ctime older than the hashing by RACY_NS."""
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=blobs, prefix=".incoming-")
    try:
        with _open_regular_file(path) as fin, os.fdopen(fd, "wb") as fout:
            before = os.fstat(fin.fileno())
            n = _copy_fd(fin.fileno(), fout.fileno())
            after = os.fstat(fin.fileno())
        trusted = (hashed is not None and hashed["stat"] == _stat_key(before) == _stat_key(after)
                   and n == before.st_size and before.st_ctime_ns < hashed["hashed_at_ns"] - RACY_NS)
        if not trusted:              # changed since it was hashed (or may have): hash what was copied
            h = hashlib.sha256()
            with open(tmp, "rb") as copied:
                while chunk := copied.read(READ_CHUNK):
                    h.update(chunk)
        digest = hashed["sha256"] if trusted else h.hexdigest()
        os.chmod(tmp, 0o444)
        final = _blob_path(blobs, digest)
        final.parent.mkdir(exist_ok=True)
        os.replace(tmp, final)
        return digest, n
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _copy_fd(src: int, dst: int) -> int:
    """Copy in the kernel (copy_file_range: no user-space buffers, a reflink where the filesystem
    can); plain reads and writes where it is not supported. Returns the bytes copied."""
    n = 0
    try:
        while True:
            got = os.copy_file_range(src, dst, 1 << 30)
            if got == 0:
                return n
            n += got
    except OSError:
        if n:
            raise
    while chunk := os.read(src, READ_CHUNK):
        view = memoryview(chunk)
        while view:
            view = view[os.write(dst, view):]
        n += len(chunk)
    return n


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


def snapshot_folder(src: Path, dst: Path, max_bytes: int) -> Snapshot:
    """Snapshot src into dst (harness-owned, read-only) and hash the content: sha256 over sorted
    (path, file hash). Files are hashed first (large reads, several files at once) and only a
    content not yet in the run's blob store (`dst.parent/.blobs`) is copied; every file of the
    snapshot is a hard link to its blob, so a resubmitted or unchanged file costs a hash, not a
    copy. Stops and refuses past max_bytes (the agent may grow a file after the size check)."""
    from concurrent.futures import ThreadPoolExecutor

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
        files = sorted(p for p in src.rglob("*") if p.is_file())
        known, seen = _read_stat_cache(dst.parent / STAT_CACHE), {}
        with ThreadPoolExecutor(min(HASH_THREADS, max(1, len(files)))) as pool:
            hashes = list(pool.map(lambda p: _hash_file(p, budget, known, seen), files))
        for path, (digest, size) in zip(files, hashes):
            rel = path.relative_to(src)
            blob = _blob_path(blobs, digest)
            if not blob.exists():
                hashed = digest
                digest, size = _store_blob(path, blobs, seen.get(str(path)))
                blob = _blob_path(blobs, digest)
                if digest != hashed:         # changed since it was hashed: its recorded stat is stale
                    seen.pop(str(path), None)
            total += size
            if total > max_bytes:
                budget.take(max_bytes + 1)      # the same refusal as while hashing
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(blob, target)
            except OSError:                     # a filesystem without hard links (or at its link limit)
                shutil.copyfile(blob, target)
                os.chmod(target, 0o444)
            entries.append((str(rel), digest))
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

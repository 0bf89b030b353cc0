"""Submission intake: validate the folder an agent submitted, snapshot it into harness-owned
storage and hash it. The grader only ever reads the snapshot.

The folder is held by descriptor (grading_host/submitted_folder.py): every check and every read goes
through the descriptors opened once, never through a path the agent could change in between."""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

# SubmissionRejected and check_model_path_text are re-exported: the desk and the API take them from here
from autorl_tui.grading_host.submission_errors import SubmissionRejected, check_model_path_text  # noqa: F401
from autorl_tui.grading_host.submitted_folder import SubmittedFolder, hold_folder, open_submission

WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "model*.safetensors")
# A submission may be at most SIZE_FACTOR times the base model's size (the card's
# `submission_cap: {size_factor: F}` changes F), and never less than MIN_SNAPSHOT_CAP_BYTES:
# a full fine-tune saved in fp32 from a bf16 base is 2x, plus tokenizer and config files.
DEFAULT_SIZE_FACTOR = 4.0
MIN_SNAPSHOT_CAP_BYTES = 1024**3


@dataclass
class Snapshot:
    """A snapshot in place. content_hash is None until hash_snapshot has hashed the files copied
    without hashing (snapshot_folder's defer_hash_over)."""
    path: Path
    content_hash: str | None
    n_files: int
    total_bytes: int
    label: str = ""
    files: list = field(default_factory=list, repr=False)   # (rel, sha256) or _Copied, by path

    @property
    def unhashed_bytes(self) -> int:
        return sum(f.size for f in self.files if isinstance(f, _Copied))


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
COPY_CHUNK = 64 << 20  # bytes per copy_file_range call (the cap is checked between calls)
HASH_THREADS = 4
BLOBS = ".blobs"       # beside a run's snapshots: one read-only file per content hash, linked into them
INCOMING = ".incoming-"  # a blob being copied or not hashed yet (in BLOBS; pruned only once orphaned: snapshot_retention)

PARTIAL = ".partial"    # a snapshot being made: NNN.partial, renamed to NNN once whole (pruned once orphaned)
STAT_CACHE = ".statcache.json"  # beside a run's snapshots: what each submitted file's stat was when hashed
RACY_NS = 2_000_000_000         # a file changed this close to its hashing is hashed again (timestamps are coarse)
_STAT_CACHE_LOCK = threading.Lock()   # snapshots of one run may be taken at once (one thread each)


def _stat_key(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


@dataclass
class _Copied:
    """A file copied into the run's blob store under an INCOMING name, not hashed yet."""
    rel: str
    tmp: Path
    size: int
    stat_key: list[int] | None    # the source's stat, when it did not change during the copy
    copied_at_ns: int


def _copy_fd(fd_in: int, fd_out: int, budget: _Budget) -> int:
    """Copy fd_in (from its start) to fd_out in the kernel (copy_file_range: a reflink where the
    filesystem can, a page-cache copy otherwise); a read/write loop where the kernel cannot."""
    n = 0
    try:
        while got := os.copy_file_range(fd_in, fd_out, COPY_CHUNK):
            budget.take(got)
            n += got
        return n
    except OSError as exc:
        if n or exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM):
            raise
    buf = memoryview(bytearray(READ_CHUNK))
    while got := os.readv(fd_in, [buf]):
        budget.take(got)
        os.write(fd_out, buf[:got])   # a regular file takes the whole write
        n += got
    return n


def _take_file(folder: SubmittedFolder, rel: str, blobs: Path, budget: _Budget, known: dict) -> _Copied | str:
    """The file at rel, in the run's blob store: its sha256 when the run knows its content, else the
    copy (a _Copied, hashed later by hash_snapshot). The file is opened once (no link followed,
    grading_host/submitted_folder.py) and copied from that descriptor, so the copy is what gets hashed.
    It is not read at all when the open inode's stat (fstat: inode, size, mtime, ctime) equals the
    run's record from an earlier snapshot whose copy came RACY_NS after its ctime, and that blob is
    still there: any write, truncate, utime or replacement moves ctime, which no unprivileged
    process can set."""
    key = f"{folder.label}/{rel}"
    fd = folder.open_file(rel)
    try:
        st = os.fstat(fd)
        entry = known.get(key)
        if (entry and entry["stat"] == _stat_key(st) and st.st_ctime_ns < entry["hashed_at_ns"] - RACY_NS
                and _blob_path(blobs, entry["sha256"]).exists()):
            budget.take(st.st_size)
            return str(entry["sha256"])
        copied_at = time.time_ns()
        out, tmp = tempfile.mkstemp(dir=blobs, prefix=INCOMING)
        try:
            try:
                n = _copy_fd(fd, out, budget)
                os.fchmod(out, 0o444)
            finally:
                os.close(out)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        unchanged = _stat_key(os.fstat(fd)) == _stat_key(st) and n == st.st_size
        return _Copied(rel, Path(tmp), n, _stat_key(st) if unchanged else None, copied_at)
    finally:
        os.close(fd)


class _Budget:
    """The bytes read so far against the cap, shared by the copying threads."""

    def __init__(self, src: SubmittedFolder, max_bytes: int):
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
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _add_to_stat_cache(path: Path, entries: dict) -> None:
    """Merge entries into the run's stat cache (re-read under the lock: another snapshot of the run
    may have added its own since)."""
    if not entries:
        return
    with _STAT_CACHE_LOCK:
        merged = {**_read_stat_cache(path), **entries}
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        tmp.write_text(json.dumps(merged))
        os.replace(tmp, path)


def _blob_path(blobs: Path, digest: str) -> Path:
    return blobs / digest[:2] / digest


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as fh:
        buf = memoryview(bytearray(READ_CHUNK))
        while got := fh.readinto(buf):
            h.update(buf[:got])          # releases the GIL on large buffers: files go in parallel
    return h.hexdigest()


def _settle_copy(snap: Snapshot, copied: _Copied) -> tuple[str, dict | None]:
    """Hash one harness-owned copy and file it under its hash in the blob store; the snapshot's
    file is then a link to that blob (an earlier blob of the same content replaces the copy)."""
    digest = _sha256_file(copied.tmp)
    blobs = snap.path.parent / BLOBS
    final = _blob_path(blobs, digest)
    final.parent.mkdir(exist_ok=True)
    try:
        os.link(copied.tmp, final)           # never replaces a blob already linked into a snapshot
    except FileExistsError:
        target = snap.path / copied.rel      # the same content was there: share its blob
        swap = target.with_name(f".{target.name}.{os.getpid()}-{threading.get_ident()}")
        try:
            os.link(final, swap)
            os.replace(swap, target)
        except OSError:                      # kept as copied: the same bytes, one more inode
            swap.unlink(missing_ok=True)
    copied.tmp.unlink(missing_ok=True)
    seen = None
    if copied.stat_key is not None:
        seen = {"stat": copied.stat_key, "sha256": digest, "hashed_at_ns": copied.copied_at_ns}
    return digest, seen


def hash_snapshot(snap: Snapshot) -> str:
    """The snapshot's content hash, hashing the files snapshot_folder copied without hashing them
    (the harness-owned copies, which nobody else can write): sha256 over sorted (path, file hash).
    Sets snap.content_hash; a second call returns it."""
    from concurrent.futures import ThreadPoolExecutor

    if snap.content_hash is not None:
        return snap.content_hash
    pending = [f for f in snap.files if isinstance(f, _Copied)]
    with ThreadPoolExecutor(min(HASH_THREADS, max(1, len(pending)))) as pool:
        settled = dict(zip((c.rel for c in pending), pool.map(lambda c: _settle_copy(snap, c), pending)))
    _add_to_stat_cache(snap.path.parent / STAT_CACHE,
                       {f"{snap.label}/{rel}": seen for rel, (_, seen) in settled.items() if seen})
    outer = hashlib.sha256()
    for f in snap.files:
        rel, digest = (f.rel, settled[f.rel][0]) if isinstance(f, _Copied) else f
        outer.update(f"{rel}\0{digest}\n".encode())
    snap.files = []
    snap.content_hash = outer.hexdigest()
    return snap.content_hash


def snapshot_folder(src: "SubmittedFolder | Path", dst: Path, max_bytes: int,
                    defer_hash_over: int | None = None) -> Snapshot:
    """Snapshot src into dst (harness-owned, read-only). Each file is read once, from its own
    descriptor, copied in the kernel into the run's blob store (`dst.parent/.blobs`), several files
    at once; a file unchanged since an earlier snapshot (its recorded stat) is not read again but
    linked from its blob. Every file of the snapshot is a hard link into the blob store. Stops and
    refuses past max_bytes (the agent may grow a file after the size check).

    The copies are hashed before it returns, unless defer_hash_over is set and they hold at least
    that many bytes: it then returns as soon as the copy is in place, content_hash None, and
    hash_snapshot(snapshot) hashes them later (the grading can read the snapshot meanwhile). A
    Path is a harness-owned folder, held the same way."""
    from concurrent.futures import ThreadPoolExecutor

    if not isinstance(src, SubmittedFolder):
        with hold_folder(src) as held:
            return snapshot_folder(held, dst, max_bytes, defer_hash_over)
    tmp = dst.with_name(dst.name + PARTIAL)
    if tmp.exists():
        shutil.rmtree(tmp)
    blobs = dst.parent / BLOBS
    blobs.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True)
    budget = _Budget(src, max_bytes)
    total = 0
    taken: list[_Copied | str] = []
    try:
        rels = [e.rel for e in src.entries]
        known = _read_stat_cache(dst.parent / STAT_CACHE)
        with ThreadPoolExecutor(min(HASH_THREADS, max(1, len(rels)))) as pool:
            futures = [pool.submit(_take_file, src, rel, blobs, budget, known) for rel in rels]
            for future in futures:
                try:
                    taken.append(future.result())
                except BaseException:
                    for rest in futures:          # the copies already made go with the partial snapshot
                        made = None if rest.cancel() or rest.exception() is not None else rest.result()
                        if isinstance(made, _Copied):
                            made.tmp.unlink(missing_ok=True)
                    raise
        files: list[_Copied | tuple[str, str]] = []
        for rel, got in zip(rels, taken):
            size = got.size if isinstance(got, _Copied) else os.stat(_blob_path(blobs, got)).st_size
            total += size
            if total > max_bytes:
                budget.take(max_bytes + 1)      # the same refusal as while copying
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            blob = got.tmp if isinstance(got, _Copied) else _blob_path(blobs, got)
            try:
                os.link(blob, target)
            except OSError:                     # a filesystem without hard links (or at its link limit)
                shutil.copyfile(blob, target)
                os.chmod(target, 0o444)
            files.append(got if isinstance(got, _Copied) else (rel, got))
    except BaseException:
        for got in taken:
            if isinstance(got, _Copied):
                got.tmp.unlink(missing_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)     # nothing half-written is left in the snapshots
        raise
    if dst.exists():
        shutil.rmtree(dst)
    os.replace(tmp, dst)
    snap = Snapshot(path=dst, content_hash=None, n_files=len(files), total_bytes=total, label=src.label, files=files)
    pending = snap.unhashed_bytes
    if defer_hash_over is None or pending < defer_hash_over or not pending:
        hash_snapshot(snap)
    return snap


def take_submission(workspace: Path, model_path, dst: Path, cap: int, base_model_bytes: int,
                    size_factor: float | None = None, defer_hash_over: int | None = None,
                    measured: Callable[[int], None] | None = None) -> Snapshot:
    """The whole intake of a submitted folder, on one set of descriptors: open it beneath the
    workspace (no link followed), check it looks like a model, check its size (measured(bytes)
    is told it), snapshot it (defer_hash_over: as snapshot_folder)."""
    with open_submission(workspace, model_path) as folder:
        check_model_folder(folder)
        check_snapshot_size(folder, cap, base_model_bytes, size_factor)
        if measured is not None:
            measured(folder_bytes(folder)[0])
        return snapshot_folder(folder, dst, cap, defer_hash_over)


def hash_snapshot_folder(folder: Path) -> str:
    """The content hash of a snapshot folder as it is on disk (an interrupted intake's, after an
    engine restart): the same sha256 over sorted (path, file hash) as hash_snapshot."""
    outer = hashlib.sha256()
    for p in sorted((p for p in folder.rglob("*") if p.is_file()), key=lambda p: p.relative_to(folder).parts):
        outer.update(f"{p.relative_to(folder).as_posix()}\0{_sha256_file(p)}\n".encode())
    return outer.hexdigest()

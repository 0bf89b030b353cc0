"""Snapshots of the agent's `code/` folder: text files under a size cap, content-addressed in the
store's `blobs`; a new revision only when something changed. Polling (not inotify) so it works the
same for bind mounts and remote executors; debounced so a burst of writes makes one revision."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

MAX_FILE_BYTES = 512 * 1024
MAX_FILES = 2000
SKIP_DIRS = {"__pycache__", ".git", ".ipynb_checkpoints", "wandb", "runs", "checkpoints", ".venv", "node_modules"}


@dataclass
class CodeScan:
    signature: tuple
    files: dict[str, Path]
    skipped: list[str]


def scan_code(code_dir: Path) -> CodeScan:
    files: dict[str, Path] = {}
    skipped: list[str] = []
    sig = []
    if not code_dir.is_dir():
        return CodeScan((), files, skipped)
    for dirpath, dirnames, filenames in os.walk(code_dir):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            path = Path(dirpath) / name
            rel = str(path.relative_to(code_dir))
            try:
                st = path.lstat()
            except OSError:
                continue
            if not path.is_file() or path.is_symlink():
                continue
            if st.st_size > MAX_FILE_BYTES or len(files) >= MAX_FILES:
                skipped.append(rel)
                continue
            files[rel] = path
            sig.append((rel, st.st_size, st.st_mtime_ns))
    return CodeScan(tuple(sig), files, skipped)


def read_text_file(path: Path) -> bytes | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return data


class RevisionTracker:
    """Decides when to snapshot; the caller stores (store.put_blob / revisions row)."""

    def __init__(self, code_dir: Path, debounce_s: float = 1.5, last_manifest: dict | None = None):
        self.code_dir = code_dir
        self.debounce_s = debounce_s
        self.last_manifest: dict[str, str] | None = last_manifest
        self._last_sig: tuple | None = None
        self._changed_at: float | None = None

    def due(self, now: float | None = None) -> bool:
        """True when the folder changed and then stayed still for the debounce time."""
        now = now or time.time()
        sig = scan_code(self.code_dir).signature
        if sig != self._last_sig:
            self._last_sig = sig
            self._changed_at = now
            return False
        return self._changed_at is not None and now - self._changed_at >= self.debounce_s

    def snapshot(self, put_blob) -> tuple[dict[str, str], list[str], int] | None:
        """Read the folder, store new blobs; returns (manifest, skipped, total_bytes) or None if unchanged."""
        scan = scan_code(self.code_dir)
        self._last_sig, self._changed_at = scan.signature, None
        manifest: dict[str, str] = {}
        skipped = list(scan.skipped)
        total = 0
        for rel, path in scan.files.items():
            data = read_text_file(path)
            if data is None:
                skipped.append(rel)
                continue
            manifest[rel] = put_blob(data)
            total += len(data)
        if manifest == self.last_manifest:
            return None
        self.last_manifest = manifest
        return manifest, skipped, total

"""Things built once per test session and shared by every test process of it (pytest-xdist
workers included): each lives in a folder under $AUTORL_TEST_SHARED (made and removed by
tests/conftest.py), built under a file lock by whichever process asks first."""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path
from typing import Callable


def build_once(name: str, build: Callable[[Path], None]) -> Path:
    """The folder `name`, filled by `build(folder)` unless a process of this session already did.
    A failed build leaves nothing behind (the next process to ask tries again and fails too)."""
    root = Path(os.environ["AUTORL_TEST_SHARED"])
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(mode=0o711)
            try:
                build(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            done.touch()
    return folder

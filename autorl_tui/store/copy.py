"""A whole, checked copy of a store (`autorl-tui store move`): SQLite's backup API folds the WAL in,
`PRAGMA quick_check` checks the copy, and it is put in place atomically. Nothing else is written."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from autorl_tui.store.db import StoreError


def copy_whole(src: Path, dst: Path) -> None:
    """Copy the store `src` to `dst` (which must not exist); StoreError, and no `dst`, on failure."""
    dst.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.copying")
    tmp.unlink(missing_ok=True)
    try:
        source = sqlite3.connect(str(src))
        try:
            target = sqlite3.connect(str(tmp))
            try:
                source.backup(target)
                verdict = target.execute("PRAGMA quick_check").fetchone()[0]
            finally:
                target.close()
        finally:
            source.close()
        if verdict != "ok":
            raise StoreError(f"the copy of {src} failed SQLite's check ({verdict})")
        os.chmod(tmp, 0o600)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, dst)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot copy the store {src} to {dst}: {exc}") from None
    finally:
        tmp.unlink(missing_ok=True)

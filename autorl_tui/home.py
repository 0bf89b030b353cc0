"""The home directory: one folder holds the store, caches, workspaces and reports.

Resolution order: --home DIR, else $AUTORL_HOME, else a per-user default. One engine per home,
guarded by an flock on `engine.lock` that records the holder's pid.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from autorl_tui.exitcodes import InfraError, UsageError
from autorl_tui import settings


def default_home() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "autorl-tui"


def resolve_home(cli_value: str | None = None) -> Path:
    if cli_value:
        return Path(cli_value).expanduser().resolve()
    env = settings.current().home
    if env:
        return env.resolve()
    return default_home()


@dataclass(frozen=True)
class Home:
    root: Path

    @classmethod
    def open(cls, cli_value: str | None = None, create: bool = True) -> "Home":
        home = cls(resolve_home(cli_value))
        home.check(writable=create)
        if create:
            try:
                home.ensure()
            except OSError as exc:
                raise UsageError(f"cannot set up home {home.root}: {exc.strerror or exc}; "
                                 f"pass a writable folder with --home") from None
        return home

    def check(self, writable: bool) -> None:
        """A home that is a file, or read-only when it must be written, is refused before anything
        is created (so nothing is left half-written)."""
        if self.root.exists() and not self.root.is_dir():
            raise UsageError(f"home {self.root} is a file, not a folder; pass a folder with --home "
                             f"(it is created when missing)")
        existing = self.root
        while not existing.exists():
            existing = existing.parent
        if not existing.is_dir():
            raise UsageError(f"home {self.root} cannot be created: {existing} is a file; pass another --home")
        if not writable:
            return
        if not os.access(existing, os.W_OK | os.X_OK):
            what = "home" if existing == self.root else f"home {self.root} cannot be created: its parent"
            raise UsageError(f"{what} {existing} is not writable; pass a writable folder with --home "
                             f"(or fix its permissions)")
        if self.root.exists():
            for part in (self.store_path, self.cache, self.runs_dir, self.workspaces):
                if part.exists() and not os.access(part, os.W_OK):
                    raise UsageError(f"{part} in home {self.root} is not writable; pass a writable --home")

    # Harness-private parts are 0700 so that an agent running as another user cannot read them;
    # the root itself is 0711 (traverse only) so workspaces below it stay reachable.
    def ensure(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o711)
        for private in (self.cache, self.runs_dir, self.snapshots, self.reports, self.models):
            private.mkdir(parents=True, exist_ok=True)
            os.chmod(private, 0o700)
        self.workspaces.mkdir(exist_ok=True)
        os.chmod(self.workspaces, 0o711)
        self.agents_dir.mkdir(exist_ok=True)

    @property
    def store_path(self) -> Path:
        return self.root / "store.db"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def models(self) -> Path:
        return self.root / "models"

    @property
    def data(self) -> Path:
        """Official data fetched by `autorl-tui data get TASK`, one folder per task (harness-private:
        it holds held-out splits)."""
        return self.root / "data"

    @property
    def workspaces(self) -> Path:
        return self.root / "workspaces"

    @property
    def runs_dir(self) -> Path:
        """Harness-owned per-run files: agent logs, grading requests/results, exit status."""
        return self.root / "runs"

    @property
    def snapshots(self) -> Path:
        """Harness-owned copies of submitted checkpoints (graded from here, never from output/)."""
        return self.root / "snapshots"

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    @property
    def exports(self) -> Path:
        """Run exports the demo writes; apart from reports/, whose `<id>.json` is the report's JSON."""
        return self.root / "exports"

    @property
    def agents_dir(self) -> Path:
        return self.root / "agents"

    @property
    def lock_path(self) -> Path:
        return self.root / "engine.lock"

    @property
    def socket_path(self) -> Path:
        return self.root / "engine.sock"

    def task_cache(self, task_id: str) -> Path:
        return self.cache / "tasks" / task_id

    def run_dir(self, run_id: str) -> Path:
        return self.runs_dir / run_id

    @property
    def gradings(self) -> Path:
        """The engine's folder of gradings (`gradings/<run>/<grading>`): the one view of its shared
        warm grading server (root's, traverse only: docs/grading.md)."""
        return self.root / "gradings"


def _locked_elsewhere(fd: int, mode: int) -> bool:
    """Whether another open file holds a lock on fd's file that `mode` conflicts with; closes fd."""
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


class EngineLock:
    """Exclusive per-home lock. The holder's pid and start time are written into the lock file."""

    def __init__(self, home: Home):
        self.home = home
        self._fd: int | None = None

    def holder(self) -> dict | None:
        try:
            data = json.loads(self.home.lock_path.read_text() or "{}")
        except (OSError, ValueError):
            return None
        return data or None

    def acquire(self, role: str = "engine") -> None:
        fd = os.open(self.home.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            info = self.holder() or {}
            pid = info.get("pid", "?")
            raise InfraError(
                f"another engine (pid {pid}, {info.get('role', 'engine')}) already owns home {self.home.root}; "
                f"attach to it, stop it with `autorl-tui engine stop --home {self.home.root}`, "
                f"or use another --home"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "role": role, "since": time.time()}).encode())
        os.fsync(fd)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None

    def held(self) -> bool:
        """Whether an engine (any process) holds the home now; works on a read-only home."""
        try:
            fd = os.open(self.home.lock_path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        return _locked_elsewhere(fd, fcntl.LOCK_SH)

    def is_held_by_other(self) -> bool:
        return _locked_elsewhere(os.open(self.home.lock_path, os.O_RDWR | os.O_CREAT, 0o600), fcntl.LOCK_EX)

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()

"""The home directory: one folder holds the store, caches, workspaces and reports.

Resolution order: --home DIR, else $AUTORL_HOME, else a per-user default. One engine per home,
guarded by an flock on `engine.lock` that records the holder's pid. The store is `HOME/store.db`
unless `--store PATH` / $AUTORL_STORE put it on the engine's local disk, which the home records
(store_location.py).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from autorl_tui.exitcodes import InfraError, UsageError
from autorl_tui import settings, store_location
from autorl_tui.store_location import StoreLocation


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
    location: StoreLocation | None = field(default=None, compare=False)   # None: what the home records

    @classmethod
    def open(cls, cli_value: str | None = None, create: bool = True, store: str | None = None) -> "Home":
        """The home; `store` (else $AUTORL_STORE, which the CLI's --store sets) names where its
        store lives, which a writing command records in the home. A mismatch with the record is a
        usage error, and so is an unusable home; either way nothing is written."""
        root = resolve_home(cli_value)
        requested = store or settings.current().store
        cls(root).check(writable=create)
        home = cls(root, store_location.resolve(root, requested))
        if not create:
            return home
        home.check_store()
        new_record = home.store.recorded and store_location.read_record(root) is None
        if new_record:
            store_location.refuse_network(root, home.store.path)
        try:
            home.ensure()
            if new_record:
                store_location.record(root, home.store)
        except OSError as exc:
            raise UsageError(f"cannot set up home {home.root}: {exc.strerror or exc}; "
                             f"pass a writable folder with --home") from None
        return home

    @property
    def store(self) -> StoreLocation:
        """Where the store lives (unchecked: `store_path` checks it is usable on this machine)."""
        return self.location or store_location.resolve(self.root, None)

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
            for part in (self.cache, self.runs_dir, self.workspaces):
                if part.exists() and not os.access(part, os.W_OK):
                    raise UsageError(f"{part} in home {self.root} is not writable; pass a writable --home")

    def check_store(self) -> None:
        """A store on this machine that cannot be written, or created, is refused before anything is."""
        store = self.store.path
        if self.store.here() and store.exists() and not os.access(store, os.W_OK):
            raise UsageError(f"the store {store} of home {self.root} is not writable; fix its permissions "
                             f"or pass a writable --home")
        if self.store.recorded and self.store.here() and not store.exists():
            folder = store.parent
            while not folder.exists():
                folder = folder.parent
            if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
                raise UsageError(f"the store {store} cannot be created: {folder} is not a writable folder; "
                                 f"pass another --store")

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
        if self.store.recorded and self.store.here() and not self.store.path.parent.exists():
            self.store.path.parent.mkdir(mode=0o700, parents=True)

    @property
    def store_path(self) -> Path:
        """The store, checked for readers: on this machine, and there when the home records it
        outside (a usage error otherwise: never a new empty store)."""
        store_location.check_reader(self.root, self.store)
        return self.store.path

    def writer_store_path(self) -> Path:
        """The store for its one writer (the engine, an import): also refused on a network
        filesystem, and when a recorded store is missing while the home holds runs."""
        store_location.check_writer(self.root, self.store, self.runs_dir)
        return self.store.path

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
        self._store_fd: int | None = None     # the hold on a store outside the home (store_location.claim)

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
        if self.home.store.here():
            try:
                self._store_fd = store_location.claim(self.home.root, self.home.store)
            except BaseException:
                self.release()
                raise

    def release(self) -> None:
        if self._store_fd is not None:
            os.close(self._store_fd)
            self._store_fd = None
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

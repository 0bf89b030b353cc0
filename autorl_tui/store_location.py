"""Where a home's store lives: inside the home (`HOME/store.db`, the default) or on the engine's
local disk (`--store PATH` / `AUTORL_STORE`), recorded in `HOME/store.location` so that every later
command finds it without the flag. docs/cluster.md, "What must be shared, and why".

A store outside the home belongs to the machine that recorded it: a command on another machine
(a node mounting the same home) is told where the store is, never given a new empty one. The
engine refuses a store on a network filesystem (SQLite's WAL needs one machine's shared memory).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from autorl_tui import filesystems
from autorl_tui.exitcodes import UsageError

RECORD = "store.location"
IN_HOME = "store.db"


def this_machine() -> tuple[str, str]:
    """(host name, machine id): a store outside the home is usable only where both match. The id is
    a digest of /etc/machine-id (which systemd asks to keep confidential), not the id itself."""
    try:
        raw = Path("/etc/machine-id").read_text().strip()
    except OSError:
        raw = ""
    machine_id = hashlib.sha256(f"autorl-tui store:{raw}".encode()).hexdigest()[:32] if raw else ""
    return socket.gethostname(), machine_id


@dataclass(frozen=True)
class StoreLocation:
    path: Path
    recorded: bool = False      # named by HOME/store.location (a store outside the home)
    host: str = ""
    machine_id: str = ""

    def here(self) -> bool:
        """Whether this machine is the store's (a store in the home travels with the home)."""
        return not self.recorded or (self.host, self.machine_id) == this_machine()


def requested_path(value: str) -> Path:
    """The store file `--store VALUE` names: a folder (existing, or written with a trailing /) holds
    `store.db`."""
    p = Path(os.path.abspath(os.path.expanduser(value)))
    return p / IN_HOME if p.is_dir() or value.endswith("/") else p


def read_record(root: Path) -> StoreLocation | None:
    record = root / RECORD
    try:
        data = json.loads(record.read_text())
        return StoreLocation(Path(data["store"]), True, str(data.get("host", "")), str(data.get("machine_id", "")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{record} is unreadable ({exc}): restore it, or remove it and name the store "
                         f"again with --store PATH") from None


def resolve(root: Path, requested: str | None, via: str = "--store") -> StoreLocation:
    """The home's store. `requested` (from --store or AUTORL_STORE, named by `via`) must agree with
    what the home records; a usage error otherwise, before anything is written."""
    in_home = root / IN_HOME
    recorded = read_record(root)
    want = requested_path(requested) if requested is not None else None
    if recorded is not None:
        if want is not None and os.path.realpath(want) != os.path.realpath(recorded.path):
            raise UsageError(
                f"home {root} keeps its store at {recorded.path} (on {recorded.host}, recorded in {root / RECORD}), "
                f"not at {want} ({via}): leave {via} out, or move it there with "
                f"`autorl-tui --home {root} store move {want}` (no engine may run)")
        return recorded
    if want is None or os.path.realpath(want) == os.path.realpath(in_home):
        return StoreLocation(in_home)
    if in_home.exists():
        raise UsageError(f"home {root} keeps its store inside it ({in_home}), not at {want} ({via}): leave {via} "
                         f"out, or move it there with `autorl-tui --home {root} store move {want}` (no engine "
                         f"may run)")
    refuse_other_owner(root, want)
    refuse_foreign_file(want)
    host, machine_id = this_machine()
    return StoreLocation(want, True, host, machine_id)


def refuse_foreign_file(path: Path) -> None:
    """A file at `path` that is not a store (nor empty) is never taken for one: the engine would
    add its tables to it. A store's header says SQLite, with a schema version (user_version) set."""
    try:
        with open(path, "rb") as f:
            header = f.read(100)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"--store {path}: cannot read it ({exc.strerror}); name a file this user can write") from None
    if header and not (header[:16] == b"SQLite format 3\x00" and int.from_bytes(header[60:64], "big") > 0):
        raise UsageError(f"--store {path}: that file exists and is not an autorl-tui store; name a new file, or "
                         f"a folder (it gets store.db)")


def owner_file(store: Path) -> Path:
    """Beside a store outside a home: the home it belongs to, flocked by that home's writer."""
    return store.with_name(store.name + ".owner")


def refuse_other_owner(root: Path, store: Path) -> None:
    try:
        owner = owner_file(store).read_text().strip()
    except OSError:
        return
    if owner and owner != str(root):
        raise UsageError(f"the store {store} belongs to home {owner} ({owner_file(store)}): each home needs its own "
                         f"store (run ids and recovery would mix); pass another --store, or remove "
                         f"{owner_file(store)} if that home is gone")


def claim(root: Path, location: StoreLocation) -> int | None:
    """The writer's hold on a store outside the home (None for one inside it, which engine.lock
    guards): an flock on its owner file, which names the home. A second home's engine on the same
    store is refused, whether it runs now or ran before. Release with `os.close`."""
    if not location.recorded:
        return None
    refuse_other_owner(root, location.path)
    location.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(owner_file(location.path), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise UsageError(f"the store {location.path} is in use by another engine ({owner_file(location.path)}): "
                         f"each home needs its own store; pass another --store") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{root}\n".encode())
    os.fsync(fd)
    return fd


def record(root: Path, location: StoreLocation) -> None:
    """Write HOME/store.location atomically (a reader sees the old record or the new one)."""
    target = root / RECORD
    data = {"store": str(location.path), "host": location.host, "machine_id": location.machine_id}
    if target.exists() and read_record(root) == location:
        return
    tmp = root / f".{RECORD}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(json.dumps(data, indent=1) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o644)        # readable by every node: a command there says where the store is
    os.replace(tmp, target)


def check_here(root: Path, location: StoreLocation) -> None:
    if location.here():
        return
    host, _ = this_machine()
    raise UsageError(
        f"the store of home {root} lives on the engine's machine {location.host} at {location.path} "
        f"(recorded in {root / RECORD}); this is {host}: run this command there (e.g. "
        f"`ssh {location.host} autorl-tui runs list --home {root}`): the engine's socket {root / 'engine.sock'} "
        f"is a unix socket that other machines cannot reach (if this is that machine, renamed or reinstalled, "
        f"remove {root / RECORD} and pass --store {location.path} once)")


def check_reader(root: Path, location: StoreLocation) -> None:
    """A reader on this machine of a store outside the home that is not there is told so."""
    check_here(root, location)
    if location.recorded and not location.path.exists():
        if not (root / RECORD).exists():      # named by --store / AUTORL_STORE, nothing recorded yet
            raise UsageError(f"no store at {location.path} (named by --store or AUTORL_STORE): nothing has run in "
                             f"home {root} yet; run a plan with that --store first (the engine creates the store "
                             f"and the home records it), or check the path")
        raise UsageError(f"no store at {location.path} (recorded in {root / RECORD}): nothing has run in home "
                         f"{root} yet, or the store was removed; restore it, or remove {root / RECORD}")


def suggested(root: Path) -> Path:
    return Path("/var/tmp/autorl-tui") / hashlib.sha256(str(root).encode()).hexdigest()[:12] / IN_HOME


def refuse_network(root: Path, path: Path, via: str = "--store") -> None:
    """A usage error when `path` lies on a network filesystem (SQLite's WAL is unsafe there)."""
    fs = filesystems.probe(path)
    if not fs.network:
        return
    fix = (f"move it to this machine's local disk with `autorl-tui --home {root} store move {suggested(root)}`"
           if path.exists() else f"keep it on this machine's local disk with {via} PATH (e.g. {via} {suggested(root)}; "
                                 f"the home records it, later commands find it)")
    raise UsageError(f"the store {path} would be on a network filesystem, {fs.describe()} at {fs.path}, where "
                     f"SQLite's WAL is unsafe: {fix}")


def check_writer(root: Path, location: StoreLocation, runs_dir: Path) -> None:
    """What the store's one writer (the engine, an import) checks before opening it: on this
    machine, on a local filesystem, and not silently replaced by an empty one."""
    check_here(root, location)
    refuse_network(root, location.path)
    if location.recorded and not location.path.exists() and runs_dir.is_dir() and any(runs_dir.iterdir()):
        raise UsageError(f"the store {location.path} recorded in {root / RECORD} is missing, but home {root} holds "
                         f"run folders ({runs_dir}): restore it (a new store would forget those runs), or remove "
                         f"{root / RECORD} to start a new one")


def report(root: Path, location: StoreLocation) -> dict:
    """What `doctor` says of the store: where it is, its filesystem, whether this machine has it."""
    out: dict = {"path": str(location.path), "recorded": location.recorded, "host": location.host or None,
                 "here": location.here(), "exists": location.path.exists() if location.here() else None}
    if location.here():
        fs = filesystems.probe(location.path)
        out.update(filesystem=fs.name, f_type=f"{fs.f_type:#x}", network=fs.network, simulated=fs.simulated)
        out["note"] = (f"on a network filesystem ({fs.describe()}): the engine refuses it; keep it on local disk "
                       f"with --store {suggested(root)}") if fs.network else ""
    else:
        out["note"] = (f"on the engine's machine {location.host}, not this one ({this_machine()[0]}): run commands "
                       f"that read it there")
    return out

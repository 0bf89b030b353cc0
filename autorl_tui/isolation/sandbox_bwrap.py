"""The sandbox untrusted code runs in on this host: bubblewrap (`bwrap`) plus `setpriv`, used for
local agents (by `local_shim.py`) and for the grader worker (by `grading_client.py`).

The sandbox's root is built from nothing (a tmpfs): only what is bound in exists there, every
path at the same place as on the host (so environment variables and paths in messages stay true):
the system (/usr, /etc and the /bin, /lib links), a Python runtime (for an agent: the agent runtime,
executors/agent_runtime.py, never the harness's environment; for the grader: the harness's), and the
caller's paths. The store, caches with held-out splits, other workspaces, other homes and task
sources are absent, not covered, so there is nothing to reveal by unmounting. Inside, the program
runs as a leased unprivileged uid with no capabilities (bounding set empty), `no_new_privs`, its
own PID namespace with a fresh /proc, its own IPC namespace, a private /tmp and a minimal /dev
(plus the device nodes of its own GPUs only: `gpu_devices`). The network is the caller's choice:
the host's, or a namespace of its own (`network=False`; a local agent's is set up around it by
`sandbox_net.py`).

Uids: one per sandbox alive at once, from a fixed range, leased by an exclusive `flock` on
`/run/autorl-tui/uid-leases/<uid>` (a root-owned folder, shared by every engine and home on the
host, released by the kernel when the holder dies). The lease holder lives exactly as long as
the sandbox: the local shim for an agent, the engine for a grader (bwrap `--die-with-parent`).

The bwrap binary is `$AUTORL_BWRAP` if set, else `bwrap` on PATH."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from autorl_tui import settings
from autorl_tui.grading.sandbox_identity import SANDBOX_USER

UID_BASE = 1_500_000_000   # far above login users (1000..60000), systemd's dynamic users and the
UID_COUNT = 4096           # usual subordinate-uid ranges of rootless containers (100000..)
LEASE_DIR = Path("/run/autorl-tui/uid-leases")
SETPRIV = "/usr/bin/setpriv"
FIX = ("run the engine as root with bubblewrap installed (Debian/Ubuntu: apt-get install bubblewrap), "
       "use `executor: docker`, or set `isolation: none` in the plan (the run is then marked unisolated)")


def bwrap_path() -> str:
    return settings.current().bwrap or shutil.which("bwrap") or "/usr/bin/bwrap"


_PROBES: dict[str, tuple[bool, str]] = {}


def probe() -> tuple[bool, str]:
    """Can this host sandbox untrusted code? Runs a real sandbox once per bwrap path (cached)."""
    path = bwrap_path()
    if path in _PROBES:
        return _PROBES[path]
    result = _probe(path)
    if result[0]:
        _PROBES[path] = result   # a failure is re-checked next time (the operator may fix it meanwhile)
    return result


def _probe(path: str) -> tuple[bool, str]:
    if os.geteuid() != 0:
        return False, "the engine is not root, so it cannot run agents as other users"
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return False, f"bubblewrap not found at {path}"
    if not os.access(SETPRIV, os.X_OK):
        return False, f"{SETPRIV} not found (Debian package util-linux)"
    try:
        with UidLease.acquire() as lease:
            argv = Sandbox(uid=lease.uid, chdir=Path("/")).argv(["/bin/sh", "-c", "test $(id -u) != 0"])
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bubblewrap probe failed: {exc}"
    if proc.returncode != 0:
        tail = (proc.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        return False, f"bubblewrap probe failed (exit {proc.returncode}): {tail}"
    return True, f"bubblewrap {path}"


class NoFreeUid(OSError):
    """Every uid of the range is leased (more sandboxes alive at once than UID_COUNT)."""


class UidLease:
    """An exclusive claim on one sandbox uid, held while the open file description lives."""

    def __init__(self, uid: int, fd: int):
        self.uid, self._fd = uid, fd

    @classmethod
    def acquire(cls) -> "UidLease":
        LEASE_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = os.lstat(LEASE_DIR)
        if st.st_uid != 0 or st.st_mode & 0o022:
            raise OSError(f"{LEASE_DIR} must be a folder owned by root and writable only by it")
        for uid in range(UID_BASE, UID_BASE + UID_COUNT):
            fd = os.open(LEASE_DIR / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            # Who holds it, for a person looking: fixed width, written in place (a truncation
            # first is a journalled metadata change on every grading's path).
            line = f"{os.getpid():>10}\n".encode()
            if os.fstat(fd).st_size != len(line):
                os.ftruncate(fd, len(line))
            os.pwrite(fd, line, 0)
            return cls(uid, fd)
        raise NoFreeUid(f"all {UID_COUNT} sandbox uids from {UID_BASE} are leased")

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "UidLease":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def runtime_paths() -> list[Path]:
    """The Python installation(s) the harness runs on: the venv and the interpreter it points at."""
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parent.parent}
    return sorted(p for p in paths if p.exists())


DEVICE_ROOT_ENV = "AUTORL_DEVICE_ROOT"    # where the GPU device nodes are (tests: stand-in nodes)
GPU_CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")


def gpu_devices(ids: list[str]) -> list[Path]:
    """The host device nodes a sandbox given the GPUs `ids` binds (at /dev/<name>): their own
    /dev/nvidiaN and the driver's control nodes. Nothing for no GPU. /dev/dri is never bound
    (CUDA does not use it, and its nodes cannot be told apart per GPU here)."""
    if not ids:
        return []
    root = settings.current().device_root or Path("/dev")
    nodes = [root / name for name in GPU_CONTROL_NODES]
    nodes += [root / f"nvidia{minor}" for minor in dict.fromkeys(gpu_minor(i) for i in ids) if minor is not None]
    return [n for n in nodes if n.exists()]


def gpu_minor(device_id: str) -> int | None:
    """The /dev/nvidiaN number of a device id: the index itself, or the minor the driver lists
    for a GPU UUID (/proc/driver/nvidia/gpus/*/information)."""
    device_id = str(device_id).strip()
    if device_id.isdigit():
        return int(device_id)
    for info in Path("/proc/driver/nvidia/gpus").glob("*/information"):
        try:
            fields = dict(line.split(":", 1) for line in info.read_text().splitlines() if ":" in line)
        except OSError:
            continue
        if fields.get("GPU UUID", "").strip() == device_id and fields.get("Device Minor", "").strip().isdigit():
            return int(fields["Device Minor"])
    return None


def visible_devices(ids: list[str]) -> str:
    """CUDA_VISIBLE_DEVICES inside a sandbox that holds only these GPUs' nodes: CUDA numbers the
    devices it can open from 0, in device order, so indices are renumbered (UUIDs stay)."""
    order = sorted({int(i) for i in ids if str(i).strip().isdigit()})
    return ",".join(str(order.index(int(i))) if str(i).strip().isdigit() else str(i) for i in ids)


@dataclass
class Sandbox:
    uid: int
    chdir: Path
    ro: list[Path] = field(default_factory=list)        # bound read-only, same path
    rw: list[Path] = field(default_factory=list)        # bound read-write, same path
    ro_inside: list[Path] = field(default_factory=list)  # re-bound read-only inside a rw path (models/, data/)
    hide: list[Path] = field(default_factory=list)      # private paths that happen to lie inside a bound path
    gpus: list[str] = field(default_factory=list)   # device ids: only their nodes are bound
    # Only for the warm grader's fork server (grading_host/grader_service.py): run the command as root
    # in the sandbox holding just these capabilities (it gives each grading its own leased uid),
    # instead of as `uid` through setpriv.
    keep_caps: tuple[str, ...] = ()
    network: bool = True      # False: a network namespace of its own (see sandbox_net.py for what goes in)
    net_args: list[str] = field(default_factory=list)   # more bwrap options for that namespace (sandbox_net.py)
    info_fd: int | None = None    # bwrap writes the sandbox's pid here (JSON) once its namespaces exist
    block_fd: int | None = None   # and waits for a byte on this one before running the command
    seccomp_fd: int | None = None  # a seccomp filter bwrap installs before the command (seccomp_userns.py)
    # The Python runtime bound read-only: None is the harness's own (the grader's sandboxes); an
    # agent's sandbox names the agent runtime (executors/agent_runtime.py), whose hidden folders go in `hide`.
    runtime: list[Path] | None = None
    # The bubblewrap binary, resolved where the sandbox was asked for (the engine: AUTORL_BWRAP),
    # since the shim that builds it runs with a minimal environment. None: bwrap_path() here.
    bwrap: str | None = None

    def argv(self, command: list[str]) -> list[str]:
        argv = [self.bwrap or bwrap_path(), "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc",
                "--unshare-uts", "--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
        if not self.network:
            argv.insert(1, "--unshare-net")
        for flag, fd in (("--info-fd", self.info_fd), ("--block-fd", self.block_fd), ("--seccomp", self.seccomp_fd)):
            if fd is not None:
                argv[1:1] = [flag, str(fd)]
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            host = Path("/") / name
            if host.is_symlink():
                argv += ["--symlink", os.readlink(host), str(host)]
            elif host.is_dir():
                argv += ["--ro-bind", str(host), str(host)]
        argv += ["--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp",
                 "--perms", "0755", "--dir", "/var", "--perms", "1777", "--tmpfs", "/var/tmp", "--tmpfs", "/run"]
        if self.gpus:
            for node in gpu_devices(self.gpus):
                argv += ["--dev-bind", str(node), f"/dev/{node.name}"]
            if Path("/sys").is_dir():
                argv += ["--ro-bind", "/sys", "/sys"]
        runtime = runtime_paths() if self.runtime is None else self.runtime
        binds = [(p, "--ro-bind") for p in _unique([*runtime, *self.ro]) if p.exists()]
        binds += [(p, "--bind") for p in _unique(self.rw)]
        made: set[Path] = {Path("/")}
        # Shallow first, so a bind inside another lands on top of it; folders bwrap would create on
        # the way get 0755 here (bwrap's own default, 0700, would lock the sandbox's uid out).
        for p, how in sorted(binds, key=lambda b: len(b[0].parts)):
            for parent in reversed(p.parents):
                if parent not in made:
                    argv += ["--perms", "0755", "--dir", str(parent)]
                    made.add(parent)
            argv += [how, str(p), str(p)]
            made.add(p)
        bound = [p for p, _ in binds]
        for p in self.ro_inside:
            if p.exists():
                argv += ["--ro-bind", str(p), str(p)]
        for p in self.hide:
            if any(_inside(p, b) for b in bound) and (p.exists() or p.is_symlink()):
                argv += (["--tmpfs", str(p), "--remount-ro", str(p)] if p.is_dir() and not p.is_symlink()
                         else ["--ro-bind", "/dev/null", str(p)])
        argv += self.net_args
        # The sandbox uid has no passwd entry: USER and LOGNAME answer getpass.getuser() (the
        # caller's environment gives HOME, a folder the sandboxed process owns).
        argv += ["--setenv", "USER", SANDBOX_USER, "--setenv", "LOGNAME", SANDBOX_USER]
        if self.keep_caps:
            argv += ["--cap-drop", "ALL"]
            for cap in self.keep_caps:
                argv += ["--cap-add", cap]
            return argv + ["--chdir", str(self.chdir), "--", *command]
        argv += ["--chdir", str(self.chdir), "--", SETPRIV, f"--reuid={self.uid}", f"--regid={self.uid}",
                 "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
        return argv + list(command)


def _unique(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        p = Path(os.path.abspath(p))
        if p not in out:
            out.append(p)
    return out


def _inside(path: Path, root: Path) -> bool:
    try:
        Path(os.path.abspath(path)).relative_to(os.path.abspath(root))
        return True
    except ValueError:
        return False


def chown_tree(root: Path, uid: int, entries: tuple[str, ...] | None = None) -> None:
    """Give root (the folder itself) and everything under root/<entry> (all entries when None) to
    uid, never following a link (an earlier sandbox, under another uid, may have left anything there)."""
    os.chown(root, uid, uid, follow_symlinks=False)
    for name in (os.listdir(root) if entries is None else entries):
        top = root / name
        if not (top.exists() or top.is_symlink()):
            continue
        os.chown(top, uid, uid, follow_symlinks=False)
        if top.is_symlink() or not top.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            for entry in dirnames + filenames:
                os.chown(os.path.join(dirpath, entry), uid, uid, follow_symlinks=False)

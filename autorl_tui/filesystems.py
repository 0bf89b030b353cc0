"""Which filesystem a path lies on, and whether it is a network one (where SQLite's WAL is unsafe).

The kernel's answer: `statfs(2)`'s `f_type` magic number. A FUSE mount is a network filesystem
unless its subtype (from /proc/self/mountinfo) is a known local one (`fuse-overlayfs`, the root of
a rootless container). Tests simulate a network filesystem with `AUTORL_TEST_NETWORK_FS` (folders
reported as NFS; docs/settings.md). A leaf module: it imports only `settings`.
"""
from __future__ import annotations

import ctypes
import functools
import os
from dataclasses import dataclass
from pathlib import Path

from autorl_tui import settings

NFS = 0x6969
FUSE = 0x65735546
# f_type -> (name, network?). Local types not listed are reported by their number, as local.
KNOWN: dict[int, tuple[str, bool]] = {
    NFS: ("nfs", True),
    0xFF534D42: ("cifs", True),
    0xFE534D42: ("smb2", True),
    0x517B: ("smb", True),
    0x0BD00BD0: ("lustre", True),
    0x47504653: ("gpfs", True),
    0x00C36400: ("ceph", True),
    0x01021997: ("9p", True),
    0x6B414653: ("afs", True),
    0x5346414F: ("openafs", True),
    0x013111A8: ("ibrix", True),
    0xA501FCF5: ("vxfs", False),
    FUSE: ("fuse", True),
    0xEF53: ("ext4", False),
    0x58465342: ("xfs", False),
    0x9123683E: ("btrfs", False),
    0x01021994: ("tmpfs", False),
    0x794C7630: ("overlayfs", False),
    0x2FC12FC1: ("zfs", False),
    0xF2F52010: ("f2fs", False),
    0x4D44: ("vfat", False),
}
LOCAL_FUSE = {"fuse-overlayfs", "lxcfs"}


@dataclass(frozen=True)
class FsInfo:
    path: Path          # the path asked about (or its nearest existing folder)
    f_type: int
    name: str           # nfs, ext4, fuse.sshfs, 0x1234abcd ...
    network: bool
    simulated: bool = False     # AUTORL_TEST_NETWORK_FS said so

    def describe(self) -> str:
        kind = "network" if self.network else "local"
        return f"{self.name} ({kind}, f_type {self.f_type:#x}{', simulated' if self.simulated else ''})"


class _StatFs(ctypes.Structure):
    # struct statfs begins with f_type (__fsword_t, a C long on Linux); the rest is not read.
    _fields_ = [("f_type", ctypes.c_long), ("_rest", ctypes.c_byte * 256)]


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)     # this process's own C library (no ldconfig lookup)


def _statfs_type(path: Path) -> int:
    buf = _StatFs()
    if _libc().statfs(os.fsencode(path), ctypes.byref(buf)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(path))
    return buf.f_type & 0xFFFFFFFF


def _existing(path: Path) -> Path:
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def fuse_subtype(path: str | os.PathLike, mountinfo: str) -> str | None:
    """The FUSE subtype of the mount holding path (`sshfs` of `fuse.sshfs`) in a mountinfo text
    (proc(5): mount point in field 5, the filesystem type after the ` - ` separator)."""
    real, best, subtype = os.path.realpath(path), "", None
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        fields, fstype = left.split(), (right.split() or [""])[0]
        if len(fields) < 5:
            continue
        mount = fields[4].replace("\\040", " ")
        inside = real == mount or real.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, subtype = mount, (fstype.split(".", 1)[1] if fstype.startswith("fuse.") else None)
    return subtype


def probe(path: str | os.PathLike) -> FsInfo:
    """The filesystem of path, or of its nearest existing parent when it does not exist yet."""
    where = _existing(Path(path))
    real = Path(os.path.realpath(path))     # realpath resolves what exists and keeps the rest
    for folder in settings.current().test_network_fs:
        if real == Path(os.path.realpath(folder)) or real.is_relative_to(os.path.realpath(folder)):
            return FsInfo(where, NFS, "nfs", True, simulated=True)
    f_type = _statfs_type(where)
    name, network = KNOWN.get(f_type, (f"{f_type:#x}", False))
    if f_type == FUSE:
        try:
            subtype = fuse_subtype(where, Path("/proc/self/mountinfo").read_text())
        except OSError:
            subtype = None
        name = f"fuse.{subtype}" if subtype else "fuse"
        network = subtype not in LOCAL_FUSE
    return FsInfo(where, f_type, name, network)

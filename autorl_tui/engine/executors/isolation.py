"""Hiding harness-private paths from a local agent with a private mount namespace (Linux, root).

In the agent's own mount namespace, directories the agent must not read (the store, the task
cache with held-out splits, snapshots, other runs' workspaces, task sources and generators) are
covered by empty read-only tmpfs mounts and files by /dev/null; the run's own workspace is bound
back in place. The harness's view of the filesystem is unchanged. Called in the agent's child
process before exec; failures are reported on stderr (the agent's log) and the agent still starts
(the engine records the isolation level it got)."""

from __future__ import annotations

import ctypes
import os

CLONE_NEWNS = 0x00020000
MS_RDONLY = 0x1
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MS_REMOUNT = 0x20

_libc = None


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    rc = _libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                     data.encode() if data else None)
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


class NamespaceUnavailable(OSError):
    """No private mount namespace here: the agent runs with the harness's view (recorded)."""


def available() -> tuple[bool, str]:
    if os.geteuid() != 0:
        return False, "not root: private mount namespaces need CAP_SYS_ADMIN"
    return True, "ok"


def isolate(hide: list[str], workspace: str, workspaces_dir: str | None) -> None:
    """Run in the child before exec. Raises OSError when namespaces are unavailable."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.unshare(CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        raise NamespaceUnavailable(err, f"unshare(CLONE_NEWNS): {os.strerror(err)}")
    _mount("none", "/", None, MS_REC | MS_PRIVATE)
    # Opened inside the new namespace (a bind source must belong to it), before it gets covered.
    ws_fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    for path in hide:
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", MS_RDONLY, "size=16k,mode=0555")
        elif os.path.exists(path):
            _mount("/dev/null", path, None, MS_BIND)
    if workspaces_dir and os.path.isdir(workspaces_dir):
        _mount("tmpfs", workspaces_dir, "tmpfs", 0, "size=16k,mode=0711")
        target = os.path.join(workspaces_dir, os.path.basename(workspace.rstrip("/")))
        os.mkdir(target, 0o755)
        _mount(f"/proc/self/fd/{ws_fd}", target, None, MS_BIND)
        _mount("none", workspaces_dir, None, MS_BIND | MS_RDONLY | MS_REMOUNT)   # freeze the tmpfs
    os.close(ws_fd)
    os.chdir(workspace)

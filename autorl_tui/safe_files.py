"""Reading and writing files in places an untrusted agent can write to (its workspace).

The harness runs with more privilege than the agent, so every path under the workspace may have
been replaced by the agent with a symlink (to a host file), a FIFO (a read that never returns), a
device (`/dev/zero`: a read that never ends) or a huge sparse file. These primitives never follow
a link in any component below the trusted root, never block on open, accept regular files only,
and bound what they read. Writes create a fresh temporary file with O_EXCL next to the target and
rename it over the target: a rename replaces a planted link, it never writes through it.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class UnsafeFile(OSError):
    """The path is not a plain regular file reachable without links (what the agent did is in the message)."""


class FileTooLarge(OSError):
    """A regular file larger than the caller's bound."""


def _parts(root: Path, path: Path) -> list[str]:
    rel = Path(os.path.normpath(path)).relative_to(os.path.normpath(root)) if Path(path).is_absolute() else Path(path)
    parts = [p for p in rel.parts if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise UnsafeFile(errno.EPERM, f"{path}: '..' is not allowed below {root}")
    return parts


def open_dir_beneath(root: Path, rel_dir: Path | str = ".") -> int:
    """A directory fd for root/rel_dir, every component below root opened without following links."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in _parts(root, Path(rel_dir)):
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafeFile(exc.errno, f"{root / rel_dir}: '{part}' is a link or not a folder") from exc
                raise
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_regular(root: Path, path: Path | str) -> int:
    """An fd (blocking mode, read-only) on root/path, which must be a regular file reached without links.

    `path` is relative to `root` or an absolute path inside it. Raises UnsafeFile for a link, FIFO,
    socket or device, FileNotFoundError when it is absent."""
    parts = _parts(root, Path(path))
    if not parts:
        raise UnsafeFile(errno.EISDIR, f"{path}: not a file")
    dfd = open_dir_beneath(root, Path(*parts[:-1]) if len(parts) > 1 else ".")
    try:
        try:
            fd = os.open(parts[-1], _READ_FLAGS, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafeFile(exc.errno, f"{path}: is a symbolic link (only regular files are read)") from exc
            raise
    finally:
        os.close(dfd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise UnsafeFile(errno.EINVAL, f"{path}: not a regular file (a FIFO, socket, device or folder)")
    os.set_blocking(fd, True)
    return fd


def read_regular(root: Path, path: Path | str, max_bytes: int, *, offset: int = 0) -> bytes:
    """At most max_bytes of a regular file from offset. FileTooLarge when the whole file is larger
    and offset is 0 (a caller that tails a file passes an offset and reads in bounded slices)."""
    fd = open_regular(root, path)
    try:
        size = os.fstat(fd).st_size
        if offset == 0 and size > max_bytes:
            raise FileTooLarge(errno.EFBIG, f"{path}: {size} bytes, more than the {max_bytes} read here")
        return os.pread(fd, max_bytes, offset)
    finally:
        os.close(fd)


def write_replace(directory: Path, name: str, data: bytes, *, mode: int = 0o444) -> None:
    """Atomically put `data` at directory/name, an agent-writable folder: O_EXCL temp file, fchmod,
    fsync, rename. A link, FIFO or folder the agent planted at either name is replaced or refused,
    never written through."""
    if "/" in name or name in ("", ".", ".."):
        raise ValueError(f"bad file name {name!r}")
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb", closefd=False) as fh:
                fh.write(data)
            os.fchmod(fd, mode)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            os.unlink(tmp, dir_fd=dfd)
            raise
        os.close(fd)
        try:
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except OSError:
            os.unlink(tmp, dir_fd=dfd)
            raise
    finally:
        os.close(dfd)


def read_slice(root: Path, path: Path | str, offset: int, max_bytes: int) -> tuple[bytes, int]:
    """(at most max_bytes from offset, the file's size now) of a regular file: for tailing a file
    an agent appends to, one bounded slice per call."""
    fd = open_regular(root, path)
    try:
        size = os.fstat(fd).st_size
        return (os.pread(fd, max(0, min(max_bytes, size - offset)), offset) if size > offset else b""), size
    finally:
        os.close(fd)


def walk_files(root: Path, top: str, predicate, *, max_depth: int = 6, max_entries: int = 20000):
    """Workspace-relative paths of files under root/top whose name matches, without following links
    (a linked folder is not entered) and visiting at most max_entries names."""
    try:
        fd = open_dir_beneath(root, top)
    except (OSError, UnsafeFile):
        return
    seen = 0
    try:
        for dirpath, dirnames, filenames, _dfd in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
            rel = Path(top) / dirpath
            depth = len(Path(dirpath).parts) - (1 if dirpath == "." else 0)
            seen += len(dirnames) + len(filenames)
            if depth >= max_depth or seen > max_entries:
                dirnames[:] = []
            for name in filenames:
                if predicate(name):
                    yield Path(os.path.normpath(rel / name))
            if seen > max_entries:
                return
    finally:
        os.close(fd)

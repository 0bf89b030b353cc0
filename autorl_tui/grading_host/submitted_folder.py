"""The folder an agent submitted, held by descriptor (issue 31, breaches 2 and 3).

The agent owns its workspace: between any check and any read it can replace `output/`, a folder
under it or a file with a link (to `/`, to a root-only file, to another run's snapshot). So nothing
here goes through a path twice: the submitted folder is reached from the workspace's descriptor one
component at a time, each opened `O_DIRECTORY | O_NOFOLLOW` beneath its parent's descriptor (a
link anywhere is refused, never followed); it is listed through those descriptors; and each file
is opened `O_NOFOLLOW | O_NONBLOCK` beneath its own folder's descriptor, so what the snapshot
hashes and copies is the inode that was opened. Refusals name only what the agent wrote, inside
its workspace: nothing outside it is ever looked up, so they are no oracle for host paths."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from autorl_tui.grading_host.submission_errors import SubmissionRejected, check_model_path_text

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
MAX_FILES = 10_000      # a model folder holds tens of files
MAX_DEPTH = 16


@dataclass(frozen=True)
class Entry:
    rel: str            # path below the submitted folder, "/"-separated
    size: int           # st_size when listed
    allocated: int      # st_blocks * 512 when listed


class SubmittedFolder:
    """A folder held open by descriptor, with its regular files as listed (sorted by path).

    `label` names it in messages and in the run's stat cache: the workspace-relative path the agent
    gave (for a submission) or the folder's own path (a harness-owned folder)."""

    def __init__(self, fd: int, label: str, entries: list[Entry]):
        self.fd, self.label, self.entries = fd, label, entries

    @property
    def name(self) -> str:
        return PurePosixPath(self.label).name or self.label

    def names(self) -> set[str]:
        return {e.rel for e in self.entries}

    def open_file(self, rel: str) -> int:
        """A blocking read-only fd on the regular file at rel, every component opened beneath its
        parent's descriptor without following a link. SubmissionRejected for a link, a FIFO, a
        socket or a device (the agent may have swapped one in after the listing)."""
        *dirs, leaf = rel.split("/")
        dfd = os.dup(self.fd)
        try:
            for i, part in enumerate(dirs):
                nxt = _open_beneath(dfd, part, _DIR_FLAGS, f"{self.label}/{'/'.join(dirs[:i + 1])}")
                os.close(dfd)
                dfd = nxt
            fd = _open_beneath(dfd, leaf, _FILE_FLAGS, f"{self.label}/{rel}")
        except FileNotFoundError:               # listed, then renamed or deleted by the agent
            raise _vanished(f"{self.label}/{rel}") from None
        finally:
            os.close(dfd)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise SubmissionRejected(f"{self.label}/{rel} is not a regular file (a FIFO, socket, device or folder): "
                                     f"submit plain files", "not_a_file")
        os.set_blocking(fd, True)
        return fd

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "SubmittedFolder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _link_refusal(shown: str) -> SubmissionRejected:
    return SubmissionRejected(f"{shown} is a symbolic link: submissions are read only through real folders and "
                              f"files (no link anywhere in the path or inside the folder); copy the files instead",
                              "symlink_out")


def _vanished(shown: str) -> SubmissionRejected:
    return SubmissionRejected(f"{shown} went away while it was being submitted: submit a folder nothing is "
                              f"still writing (save_pretrained() first, then submit)", "missing")


def _open_beneath(dfd: int, name: str, flags: int, shown: str) -> int:
    """openat(dfd, name, flags) with O_NOFOLLOW; a link there is a refusal naming `shown`."""
    try:
        return os.open(name, flags, dir_fd=dfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:           # O_NOFOLLOW met a link (it may be gone again by now)
            raise _link_refusal(shown) from None
        if exc.errno == errno.ENOTDIR:
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                raise _vanished(shown) from None
            except OSError:
                raise exc from None
            if stat.S_ISLNK(st.st_mode):
                raise _link_refusal(shown) from None
            if stat.S_ISDIR(st.st_mode) and flags & os.O_DIRECTORY:    # a link that was swapped back since
                raise _vanished(shown) from None
        raise


def _workspace_parts(workspace: Path, model_path: str) -> list[str]:
    """The components of model_path below the workspace, judged as written: they must start with
    output/ and hold no '..' (so "output/../models/x" is refused even if it exists)."""
    given = PurePosixPath(os.path.normpath(model_path))
    if given.is_absolute():
        for root in (Path(os.path.normpath(workspace)), workspace.resolve()):
            try:
                given = given.relative_to(root)
                break
            except ValueError:
                continue
        else:
            given = PurePosixPath("..")
    parts = [p for p in given.parts if p not in ("", ".")]
    if not parts or parts[0] != "output" or ".." in parts:
        raise SubmissionRejected(f"{model_path!r} is outside output/: copy or save the checkpoint under output/ "
                                 f"(e.g. output/v1) and submit that", "outside_output")
    return parts


def open_submission(workspace: Path, model_path) -> SubmittedFolder:
    """Open the folder the agent submitted (under workspace/output/) and list it, without following
    a link anywhere. SubmissionRejected says what is wrong with it in the agent's own terms."""
    check_model_path_text(model_path)
    parts = _workspace_parts(workspace, model_path)
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)     # harness-made: trusted
    try:
        for i, part in enumerate(parts):
            shown = "/".join(parts[:i + 1])
            try:
                nxt = _open_beneath(fd, part, _DIR_FLAGS, shown if i else "output/")
            except FileNotFoundError:
                raise SubmissionRejected(f"{model_path!r} does not exist ({shown} is missing)", "missing") from None
            except NotADirectoryError:
                if i == len(parts) - 1:
                    raise SubmissionRejected(f"{model_path!r} is a file: submit the checkpoint folder "
                                             f"(save_pretrained output)", "not_a_folder") from None
                raise SubmissionRejected(f"{shown} is not a folder: submit a folder under output/",
                                         "not_a_folder") from None
            os.close(fd)
            fd = nxt
        label = "/".join(parts)
        return SubmittedFolder(fd, label, _list(fd, label))
    except BaseException:
        os.close(fd)
        raise


def hold_folder(path: Path) -> SubmittedFolder:
    """A harness-owned folder (a test's, a benchmark's) held the same way: its own path is trusted,
    everything below it is read without following links."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return SubmittedFolder(fd, str(path), _list(fd, str(path)))
    except BaseException:
        os.close(fd)
        raise


def _list(top: int, label: str) -> list[Entry]:
    """The regular files below the folder at `top`, through descriptors only. A link, FIFO, socket
    or device anywhere is a refusal; so is a folder deeper than MAX_DEPTH or more than MAX_FILES names."""
    entries: list[Entry] = []
    seen = 0

    def walk(dfd: int, prefix: str, depth: int) -> None:
        nonlocal seen
        for name in sorted(os.listdir(dfd)):
            seen += 1
            if seen > MAX_FILES:
                raise SubmissionRejected(f"{label}/ holds more than {MAX_FILES} files and folders: submit only the "
                                         f"save_pretrained() output (config, weights, tokenizer)", "too_many_files")
            rel = prefix + name
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:           # listed, then renamed or deleted by the agent
                raise _vanished(f"{label}/{rel}") from None
            if stat.S_ISLNK(st.st_mode):
                raise _link_refusal(f"{label}/{rel}")
            if stat.S_ISDIR(st.st_mode):
                if depth >= MAX_DEPTH:
                    raise SubmissionRejected(f"{label}/{rel} is nested more than {MAX_DEPTH} folders deep: "
                                             f"submit the save_pretrained() output", "too_deep")
                sub = _open_beneath(dfd, name, _DIR_FLAGS, f"{label}/{rel}")
                try:
                    walk(sub, rel + "/", depth + 1)
                finally:
                    os.close(sub)
            elif stat.S_ISREG(st.st_mode):
                entries.append(Entry(rel, st.st_size, st.st_blocks * 512))
            else:
                raise SubmissionRejected(f"{label}/{rel} is not a regular file (a FIFO, socket or device): "
                                         f"submit plain files", "not_a_file")

    walk(top, "", 0)
    entries.sort(key=lambda e: e.rel.split("/"))     # the order of sorted Paths: the content hash's
    return entries

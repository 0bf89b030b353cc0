"""Container images without a registry.

This machine (and many lab machines) cannot pull images. The default image is built offline with
`docker import` of a tiny root filesystem that holds only empty mount points, `/tmp`, and the
host's top-level symlinks (`/bin -> usr/bin` on merged-/usr systems). At run time the host's
system is bind-mounted read-only into it: `/usr`, `/etc`, the real `/bin`, `/lib`, `/lib64`,
where they are directories, and the agent runtime (executors/agent_runtime.py: a virtualenv built
for agents and its base interpreter's installation, whose own site-packages shows empty). The
agent finds an interpreter and the training stack, and nothing else of the host: not the
harness's environment, not `/home`, not `/root`, not the autorl-tui home with its held-out data.

The tag is `autorl-tui/runtime:<hash of the root's layout>`: built on first use and reused.
A user with a registry names any image instead (plan/agent `image:`); then no host path is
mounted except the container entry script, and the image must have `python3` on its PATH.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path

from autorl_tui.executors.agent_runtime import AgentRuntime
from autorl_tui.executors.base import Mount

RUNTIME_REPOSITORY = "autorl-tui/runtime"
_LAYOUT_VERSION = "1"
# /sbin is not taken from the host: Docker mounts its init at /sbin/docker-init, which must not
# land inside the read-only host /usr (merged-/usr systems link /sbin -> usr/sbin).
_TOP_LEVEL = ("usr", "etc", "bin", "lib", "lib32", "lib64", "libx32")


def _host_top_level(root: Path = Path("/")) -> tuple[list[tuple[str, str]], list[str]]:
    """(symlinks [(name, target)], real directories) among the top-level runtime folders."""
    links, dirs = [], []
    for name in _TOP_LEVEL:
        p = root / name
        if p.is_symlink():
            links.append((name, os.readlink(p)))
        elif p.is_dir():
            dirs.append(name)
    return links, dirs


def _covered(path: Path, by: list[Path]) -> bool:
    return any(path == b or b in path.parents for b in by)


def host_runtime_mounts(runtime: AgentRuntime) -> list[Mount]:
    """Read-only binds of the host system and the agent runtime the default image needs (targets =
    host paths); the runtime's hidden folders are covered by empty tmpfs mounts (`hidden_tmpfs`)."""
    _, dirs = _host_top_level()
    sources = [Path("/") / d for d in dirs]
    for p in runtime.binds():
        if p.is_dir() and not _covered(p, sources):
            sources.append(p)
    return [Mount(source=s, target=str(s), read_only=True) for s in sources]


def hidden_tmpfs(runtime: AgentRuntime) -> dict[str, str]:
    """`containers.create(tmpfs=...)` entries that show the runtime's hidden folders empty."""
    return {str(p): "ro,nosuid,nodev,size=64k,mode=755" for p in runtime.hidden()}


def _root_tar() -> bytes:
    links, dirs = _host_top_level()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        def add_dir(name: str, mode: int = 0o755) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, mode, 0
            tar.addfile(info)

        for name in dirs + ["proc", "sys", "dev", "run", "opt", "sbin"]:
            add_dir(name)
        add_dir("tmp", 0o1777)
        for name, target in links:
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.mtime = tarfile.SYMTYPE, target, 0
            tar.addfile(info)
    return buf.getvalue()


def runtime_image_tag() -> str:
    digest = hashlib.sha256(_LAYOUT_VERSION.encode() + _root_tar()).hexdigest()[:12]
    return f"{RUNTIME_REPOSITORY}:{digest}"


def ensure_runtime_image(client) -> str:
    """The default image's tag, importing it into the local engine if it is not there yet."""
    import docker.errors

    tag = runtime_image_tag()
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    repository, _, version = tag.partition(":")
    client.api.import_image_from_data(_root_tar(), repository=repository, tag=version)
    client.images.get(tag)  # raises if the import did not produce it
    return tag

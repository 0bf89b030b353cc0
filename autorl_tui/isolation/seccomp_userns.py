"""A seccomp filter (classic BPF, for bwrap `--seccomp FD`) that closes user namespaces inside a
sandbox: `unshare` and `clone` with CLONE_NEWUSER fail with EPERM, `clone3` (whose flags seccomp
cannot read) fails with ENOSYS, so the C library falls back to `clone`, as under Docker's default
profile; system calls of another ABI (32-bit, x32) fail with EPERM. Everything else is allowed.

bwrap's own `--disable-userns` needs `--unshare-user`, which maps only one uid into the
sandbox; the sandbox's program must run as its leased host uid, so the filter is the way here."""

from __future__ import annotations

import os
import platform
import struct

CLONE_NEWUSER = 0x10000000
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
EPERM, ENOSYS = 1, 38
X32_SYSCALL_BIT = 0x40000000
# BPF opcodes
LD_W_ABS = 0x20      # BPF_LD | BPF_W | BPF_ABS
JEQ_K = 0x15         # BPF_JMP | BPF_JEQ | BPF_K
JGE_K = 0x35         # BPF_JMP | BPF_JGE | BPF_K
JSET_K = 0x45        # BPF_JMP | BPF_JSET | BPF_K
RET_K = 0x06         # BPF_RET | BPF_K
NR, ARCH, ARG0_LOW = 0, 4, 16          # offsets in struct seccomp_data (little endian)

# audit arch, unshare, clone, clone3, whether x32 numbers exist
ARCHES = {"x86_64": (0xC000003E, 272, 56, 435, True),
          "aarch64": (0xC00000B7, 97, 220, 435, False)}


class Unsupported(OSError):
    """No filter for this machine's architecture."""


def userns_filter(machine: str | None = None) -> bytes:
    """The filter program, as bwrap reads it (an array of struct sock_filter)."""
    machine = machine or platform.machine()
    if machine not in ARCHES:
        raise Unsupported(f"no user-namespace filter for architecture {machine}")
    arch, unshare, clone, clone3, x32 = ARCHES[machine]
    # (code, jump if true, jump if false, k); jumps count instructions after the next one
    prog = [
        (LD_W_ABS, 0, 0, ARCH),
        (JEQ_K, 1, 0, arch),                       # native ABI: go on
        (RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM),
        (LD_W_ABS, 0, 0, NR),
    ]
    if x32:
        prog.append((JGE_K, 0, 1, X32_SYSCALL_BIT))
        prog.append((RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM))
    prog += [
        (JEQ_K, 0, 1, clone3),
        (RET_K, 0, 0, SECCOMP_RET_ERRNO | ENOSYS),
        (JEQ_K, 1, 0, unshare),
        (JEQ_K, 0, 3, clone),
        (LD_W_ABS, 0, 0, ARG0_LOW),                # flags: unshare's and clone's first argument
        (JSET_K, 0, 1, CLONE_NEWUSER),
        (RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM),
        (RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]
    return b"".join(struct.pack("<HBBI", *ins) for ins in prog)


def filter_fd() -> int:
    """A memfd holding the filter, at offset 0 (bwrap reads it to the end); inheritable by bwrap."""
    fd = os.memfd_create("autorl-userns-seccomp", 0)
    os.write(fd, userns_filter())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd

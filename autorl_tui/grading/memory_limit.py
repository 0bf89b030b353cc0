"""The grader's memory limit: a submitted model (or its config, or its chat template) that makes
the grader allocate without bound fails its grading with a clear error instead of taking the
machine, and the engine with it, down.

The limit is RLIMIT_DATA, set on the grader worker (cold path) and on each warm grading child
before it reads anything of the submission. Since Linux 4.7 it counts every private writable
mapping (heap, anonymous mmap: Python objects, torch tensors, tokenizers' buffers), not the address
space reserved without access, which is why RLIMIT_AS is not used (torch and CUDA reserve large
PROT_NONE ranges: a worker that loads a model and generates uses ~1.4 GB of address space for
~0.45 GB of data here). An allocation past it fails (MemoryError, torch's "can't allocate memory");
the worker reports it as error kind `memory` naming the limit and how to raise it.

cgroup v2 `memory.max` would also count the page cache and the worker's children; it is not used:
the grader's children are few (generated code has its own limits in the code server), it would
need the warm server's children moved into cgroups from outside its sandbox, and it could not be
exercised where this was built (the host mounts its memory controller on cgroup v1).

Setting: `AUTORL_GRADER_MEMORY` in the engine's environment, a size (`16G`, `512M`, bytes) or `0`
(no limit). Default: half of the host's physical memory, at least 2 GiB.
"""

from __future__ import annotations

import os
import re
import resource

from autorl_tui import settings

ENV = "AUTORL_GRADER_MEMORY"
MIN_DEFAULT = 2 << 30
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_OOM_TEXT = re.compile(r"MemoryError|[Cc]annot allocate memory|can't allocate memory|std::bad_alloc|"
                       r"[Mm]emory allocation (still )?failed")


class BadMemorySetting(ValueError):
    pass


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.I)
    if not m:
        raise BadMemorySetting(f"{ENV}={text!r} is not a size; use e.g. 16G, 512M or 0 (no limit)")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def default_bytes() -> int:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return MIN_DEFAULT * 4
    return max(MIN_DEFAULT, total // 2)


def limit_bytes() -> int | None:
    """The configured limit in bytes, None for no limit (`AUTORL_GRADER_MEMORY=0`)."""
    text = settings.current().grader_memory
    value = default_bytes() if text is None else parse_size(text)
    return value or None


def apply(limit: int | None) -> None:
    """In the grader process (or before its exec): allocations past `limit` fail."""
    if limit:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def current() -> int | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    return None if soft == resource.RLIM_INFINITY else soft


def human(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def looks_like_oom(exc: BaseException | None = None, text: str = "") -> bool:
    """An allocation that failed: a MemoryError, ENOMEM, or the words native allocators print."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, MemoryError) or (isinstance(exc, OSError) and exc.errno == 12):
            return True
        text += f"\n{type(exc).__name__}: {exc}"
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return bool(_OOM_TEXT.search(text)) and "CUDA out of memory" not in text


def message(limit: int | None, what: str = "") -> str:
    where = f" ({what})" if what else ""
    if not limit:
        return f"the grading ran out of memory{where}: the host has no more to give it"
    return (f"the grading ran out of its memory limit of {human(limit)} (RLIMIT_DATA){where}: the model, its "
            f"config, its chat template or the generation settings needed more; raise the limit with "
            f"{ENV} in the engine's environment (e.g. {ENV}=32G; 0 removes it)")

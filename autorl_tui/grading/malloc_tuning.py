"""glibc's malloc, set for a generation's allocations (a CPU grading's inference).

By default glibc serves every allocation above a threshold (128 KiB, raised as such blocks are
freed, up to 32 MiB) with a fresh mmap and gives it back at free, and trims the heap's free top;
torch allocates and frees a step's activations at every decoding step, so each step's memory is
new pages, faulted in and zeroed by the kernel again: 5,000-11,000 minor faults per generation of
arith-small's dev split with the tiny model, ~1/4 of its time on this VM (0.17 s -> 0.16 s in a
warm process; the first generation in a fresh grading child 0.31 s -> 0.25 s at load 3).
`keep_freed_memory` serves blocks up to MMAP_THRESHOLD from the heap and keeps up to
TRIM_THRESHOLD of freed heap for reuse: a generation then reuses its pages (a handful of faults).
Larger blocks (a big model's weights) are still mapped and given back; the memory limit
(grading/memory_limit.py, RLIMIT_DATA) counts the heap as it counts mappings."""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD = -1        # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20    # glibc's own ceiling for the dynamic threshold (64-bit)
TRIM_THRESHOLD = 256 << 20


def keep_freed_memory() -> bool:
    """Set this process's malloc as the module docstring says; False where there is no glibc
    malloc to set (another libc: nothing changes)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))

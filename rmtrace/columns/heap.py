"""Where the C allocator puts the column steps' big arrays: in mappings of their own, given back when freed.

glibc's malloc serves a block of ``M_MMAP_THRESHOLD`` bytes or more (128 KiB at
start) with a mapping of its own, unmapped when it is freed; but each time such a
block is freed it raises the threshold to that block's size (up to 32 MB).  After
the call table's first few batches, then, every row-long temporary of the column
steps (a sort's order, a gathered column: megabytes each) comes from the heap,
and what they leave there between the long-lived objects the fold makes stays
resident.  ``map_big_arrays`` fixes the threshold where it starts.  At 1M records
(``rmtrace stats --json`` and ``wedges --json`` with the cache cold, three runs
each, load 10) the peak RSS went 93 -> 84 MB and 110 -> 97 MB, the CPU time
inside the noise: a fresh mapping's pages are zeroed once per block, as the heap's
are when it grows.
"""

from __future__ import annotations

import ctypes

M_MMAP_THRESHOLD = -3
"""mallopt's parameter (glibc's malloc.h)."""
MMAP_THRESHOLD = 128 << 10
"""glibc's own starting threshold, kept."""


def map_big_arrays() -> bool:
    """Fix malloc's mmap threshold at ``MMAP_THRESHOLD`` for this process; whether the allocator took it
    (a C library without ``mallopt`` has no such threshold: nothing to do there)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))

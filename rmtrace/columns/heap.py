"""Where the C allocator puts the column steps' big arrays: in mappings of their own, given back when freed.

glibc's malloc serves a block of ``M_MMAP_THRESHOLD`` bytes or more (128 KiB at
start) with a mapping of its own, unmapped when it is freed; but each time such a
block is freed it raises the threshold to that block's size (up to 32 MB).  After
the call table's first few batches, then, every row-long temporary of the column
steps (a sort's order, a gathered column: megabytes each) comes from the heap,
and what they leave there between the long-lived objects the fold makes stays
resident.  ``map_big_arrays`` fixes the threshold where it starts.  At 1M records
(``rmtrace stats --json`` and ``wedges --json`` with the cache cold, the table
helper's runs, load 8-10) the peak RSS went 93 -> 86 MB and 110 -> 99 MB; the
CPU is not free: an A/B of wedges cold, 4 alternating rounds, gave 1.08, 0.97,
1.11, 1.22 times (median 1.10), since each temporary of 128 KiB or more is now
a fresh mapping, faulted in, zeroed and unmapped, where the heap reused its
pages (and a fixed threshold also fixes glibc's trim threshold for the
process).  It is kept: it is what brings wedges under issue 13's 100 B per
record at 1M (bench/results/columns.txt).  ``diff`` calls it too, for the
same columns, unmeasured.

The alternatives, measured by the lead on a quiet machine (2026-12-02, 1M records,
``wedges --json`` cache cold, /usr/bin/time, 2-3 alternating rounds; peak RSS,
then user+system CPU against no fixed threshold): ``malloc_trim(0)`` after each
of the table's batches, or before and after the fold, leaves the peak where it
was (117.2 MB, the same CPU): the peak is live blocks and the holes the next
step makes again, not what a trim gives back.  A fixed threshold of 512 KiB:
97.1 MB, 1.08x; 1 MiB: 103.0 MB, 1.05x; 128 KiB: 93.2 MB, 1.11x.  Fixed only
for the fold (the table's build left dynamic): 102.1 MB, 1.04x.  Only 128 KiB
clears 100 B per record with a margin.
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

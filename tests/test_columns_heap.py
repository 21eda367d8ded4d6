"""rmtrace.columns.heap: malloc's mmap threshold fixed, so that a freed big array goes back to the system."""

from __future__ import annotations

import subprocess
import sys


def test_a_freed_big_array_leaves_no_resident_memory_behind() -> None:
    """With the threshold fixed, a block freed after a bigger one was is still unmapped when freed: the
    process's RSS falls back (glibc's default would keep it in the heap, resident)."""
    script = """
import numpy as np
from rmtrace.columns.heap import map_big_arrays
def rss():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1])
assert map_big_arrays()
big = np.ones(8 << 20, dtype=np.uint8); del big  # glibc's default: the threshold rises to 8 MB here
keep = np.ones(1 << 10, dtype=np.uint8)  # a small object after it on the heap
before = rss()
block = np.ones(4 << 20, dtype=np.uint8); del block
print(rss() - before)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert int(done.stdout) < 1024, done.stdout  # KiB: the 4 MB block's pages are gone

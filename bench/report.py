"""What the bench scripts share: the best time of a few runs, and results printed as aligned rows.

Each script runs as ``python bench/NAME.py``, so this folder is first on
``sys.path`` and they import this module as ``report``.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence


def best(fn: Callable[..., object], *args: object, repeat: int = 1) -> float:
    """Seconds of the fastest of ``repeat`` calls (the machine may be shared: the best run is the least disturbed)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return min(times)


def print_rows(rows: Sequence[tuple[str, str]]) -> None:
    """One ``label  value`` line per row, the values in one column."""
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")

"""What the bench scripts share: the best time of a few runs, and results printed as aligned rows.

Each script runs as ``python bench/NAME.py``, so this folder is first on
``sys.path`` and they import this module as ``report``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def timed(fn: Callable[..., T], *args: object) -> tuple[T, float]:
    """What one call returns, and the seconds it took."""
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start


def best(fn: Callable[..., object], *args: object, repeat: int = 1) -> float:
    """Seconds of the fastest of ``repeat`` calls (the machine may be shared: the best run is the least disturbed)."""
    return min(timed(fn, *args)[1] for _ in range(repeat))


def print_rows(rows: Sequence[tuple[str, str]]) -> None:
    """One ``label  value`` line per row, the values in one column."""
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")

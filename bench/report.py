"""What the bench scripts share: the best time of a few runs, and results printed as aligned rows.

Each script runs as ``python bench/NAME.py``, so this folder is first on
``sys.path`` and they import this module as ``report``.
"""

from __future__ import annotations

import statistics
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


def paired_ratio(base: Sequence[float], step: Sequence[float]) -> tuple[float, float, float]:
    """(median, lowest, highest) of ``base[i] / step[i]``: each round's ratio from its own pair of runs.

    This machine's CPU speed moves by up to 1.5x within seconds, so a ratio of
    two medians taken minutes apart can move by that much too.  Runs of one
    round are seconds apart, and the spread of the per-round ratios says how
    far the figure can be trusted: a goal inside that range is not settled.
    """
    if len(base) != len(step) or not base:
        raise ValueError(f"paired_ratio needs runs in pairs: {len(base)} baseline, {len(step)} step")
    ratios = [b / s for b, s in zip(base, step)]
    return statistics.median(ratios), min(ratios), max(ratios)


def print_rows(rows: Sequence[tuple[str, str]]) -> None:
    """One ``label  value`` line per row, the values in one column."""
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")

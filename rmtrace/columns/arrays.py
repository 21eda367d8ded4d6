"""numpy steps the column code shares where numpy's own costs more than the step."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of an integer array (flattened): ``np.unique(values)``, without numpy 2's
    check for a masked array, whose first call imports ``numpy.ma`` (40-50 ms of every command's start)."""
    ordered = np.sort(values, axis=None)
    if not ordered.size:
        return ordered
    keep = np.empty(ordered.size, dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def within(values: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Whether each of ``values`` is in ``known`` (sorted, distinct: ``distinct``'s): ``np.isin``, which for
    keys spread wider than its lookup table sorts with ``np.unique`` (and so imports ``numpy.ma`` too)."""
    if not known.size:
        return np.zeros(np.shape(values), dtype=bool)
    at = np.minimum(np.searchsorted(known, values), known.size - 1)
    return known[at] == values


def group_rows(columns: Sequence[np.ndarray], stable: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The rows grouped by their values in ``columns`` (int arrays of one length), groups in order of their
    values: the rows in group order (``stable``: each group's rows in row order) and where each group starts
    in that order, then the end.  The columns are packed into one number per row (each by its span in these
    rows, or by its distinct values where the spans would not fit), so that one sort of numbers groups them
    (``np.unique`` of whole rows sorts rows, ~10x the cost)."""
    n = len(columns[0])
    packed = np.zeros(n, dtype=np.int64)
    room = 1
    for column in columns:
        values = np.asarray(column).astype(np.int64, copy=False)
        low = int(values.min()) if n else 0
        span = int(values.max()) - low + 1 if n else 1
        if room * span >= 1 << 62:  # the groups so far, and this column, by their distinct values (<= n each)
            kinds, known = distinct(packed), distinct(values)
            packed, values = np.searchsorted(kinds, packed), np.searchsorted(known, values)
            room, low, span = len(kinds), 0, len(known)
        packed *= span
        packed += values
        packed -= low
        room *= span
        del values
    order = np.argsort(packed, kind="stable" if stable else "quicksort")
    ordered = packed[order]
    del packed
    starts = np.flatnonzero(ordered[1:] != ordered[:-1])
    starts += 1
    return order, np.concatenate(([0], starts, [n]) if n else ([0],)).astype(np.int64)  # no rows: no group


def group_numbers(order: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Each row's group number, from ``group_rows``' order and bounds (int32 while the groups fit it)."""
    sizes = np.diff(bounds)
    numbers = np.repeat(np.arange(len(sizes), dtype=np.int32 if len(sizes) < 1 << 31 else np.int64), sizes)
    out = np.empty(len(order), dtype=numbers.dtype)
    out[order] = numbers
    return out

"""numpy steps the column code shares where numpy's own costs more than the step."""

from __future__ import annotations

from collections.abc import Iterable

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


def group_rows(columns: Iterable[np.ndarray], stable: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The rows grouped by their values in ``columns`` (int arrays of one length), groups in order of their
    values: the rows in group order (``stable``: each group's rows in row order) and where each group starts
    in that order, then the end.  The columns are packed into one number per row (each by its span in these
    rows, or by its distinct values where the spans would not fit), so that one sort of numbers groups them
    (``np.unique`` of whole rows sorts rows, ~10x the cost).  Each column is read once, in turn, and not
    held after: ``columns`` may be a generator that lets go of each column's pages when asked for the next."""
    packed = np.zeros(0, dtype=np.int64)
    room = 1
    for k, column in enumerate(columns):
        values = np.asarray(column).astype(np.int64, copy=False)
        n = len(values)
        if not k:
            packed = np.zeros(n, dtype=np.int64)
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
        del values, column
    n = len(packed)
    order = np.argsort(packed, kind="stable" if stable else "quicksort")
    starts = [np.zeros(1 if n else 0, dtype=np.int64)]
    for at in range(1, n, BLOCK):  # the sorted numbers a block at a time: no third row-long array
        ordered = packed[order[at - 1:at + BLOCK]]
        starts.append(np.flatnonzero(ordered[1:] != ordered[:-1]) + at)
    starts.append(np.array([n], dtype=np.int64))
    return order, np.concatenate(starts)  # no rows: no group, bounds [0]


BLOCK = 1 << 16
"""Rows a step works on at once where a whole row-long temporary is not needed."""


def group_numbers(order: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Each row's group number, from ``group_rows``' order and bounds (int32 while the groups fit it)."""
    sizes = np.diff(bounds)
    numbers = np.repeat(np.arange(len(sizes), dtype=np.int32 if len(sizes) < 1 << 31 else np.int64), sizes)
    out = np.empty(len(order), dtype=numbers.dtype)
    out[order] = numbers
    return out

"""numpy steps the column code shares where numpy's own costs more than the step."""

from __future__ import annotations

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

"""Columns as rows of Python values, a block at a time: what the folds iterate over."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

BLOCK = 4096
"""Rows whose CallInfo and Decoded are made at once: numpy's cost per call is paid per block, and the
objects of one block at a time are alive."""


def in_blocks(*columns: np.ndarray) -> Iterator[tuple[int, ...]]:
    """The rows of ``columns`` as tuples of Python values, made a block at a time (a list of each whole
    column would hold 30 bytes or so per value)."""
    for at in range(0, len(columns[0]), BLOCK):
        yield from zip(*(column[at:at + BLOCK].tolist() for column in columns))

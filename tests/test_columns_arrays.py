"""rmtrace.columns.arrays against the numpy functions it stands in for."""

import numpy as np
import pytest

from rmtrace.columns.arrays import distinct


@pytest.mark.parametrize("values", [
    np.zeros(0, dtype=np.int64), np.array([7], dtype=np.uint32), np.array([3, 1, 3, 2, 1], dtype=np.int64),
    np.array([[2**63 + 5, 1], [1, 2**63 + 5]], dtype=np.uint64),
    np.random.default_rng(13).integers(-50, 50, 10_000).astype(np.int16)])
def test_distinct_is_unique(values: np.ndarray) -> None:
    got, want = distinct(values), np.unique(values)
    assert got.dtype == want.dtype
    assert got.tolist() == want.tolist()

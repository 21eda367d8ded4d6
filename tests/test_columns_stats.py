"""stats' sort of (group, value) pairs, which packs into its callers' arrays in place, against lexsort."""

from __future__ import annotations

import numpy as np
import pytest

from rmtrace.columns.stats import _sorted_pairs


@pytest.mark.parametrize("major_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("spread", [10, 1 << 40, 1 << 62])  # the last does not pack: lexsort's way
def test_sorted_pairs_match_lexsort(major_dtype: type, spread: int) -> None:
    rng = np.random.default_rng(13)
    major = rng.integers(0, 500, 20_000).astype(major_dtype)
    minor = rng.integers(-spread, spread, 20_000, dtype=np.int64)
    order = np.lexsort((minor, major))
    want = major[order].astype(np.int64), minor[order]
    got = _sorted_pairs(major.copy(), minor.copy())
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])

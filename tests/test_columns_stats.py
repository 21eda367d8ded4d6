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


def test_operations_in_small_blocks_are_the_same(monkeypatch) -> None:
    """stats' operations works some steps a block of rows at a time (``arrays.BLOCK``); blocks of a few
    rows give the rows one block gives."""
    from rmtrace.decoders import decoders_for

    import rmtrace.columns.arrays as arrays
    import rmtrace.columns.stats as stats
    from rmtrace import captures
    from rmtrace.columns.cache import call_table
    from rmtrace.trace import TraceReader
    reader = TraceReader(captures.path("cuda-streams-3x-sequential"))
    table = call_table(reader, decoders_for(reader), cache=False)
    want = stats.operation_rows(table)
    assert len(want) > 10
    monkeypatch.setattr(arrays, "BLOCK", 5)
    monkeypatch.setattr(stats, "BLOCK", 5)
    assert stats.operation_rows(table) == want


def test_statuses_are_each_groups_counter() -> None:
    """Each group's statuses and counts, in the order of their first row (a Counter's), as ``_statuses``
    packs (group, status, row) into one number and sorts it."""
    from collections import Counter

    from rmtrace.columns.stats import _statuses
    rng = np.random.default_rng(13)
    group = rng.integers(0, 40, 5_000).astype(np.int32)
    status = rng.integers(0, 9, 5_000).astype(np.int32)
    bounds, text, counted = _statuses(group, status, 41)  # group 40 has no rows
    for g in range(41):
        want = Counter(s for s, mine in zip(status.tolist(), (group == g).tolist()) if mine)
        a, b = bounds[g], bounds[g + 1]
        assert list(zip(text[a:b].tolist(), counted[a:b].tolist())) == list(want.items())

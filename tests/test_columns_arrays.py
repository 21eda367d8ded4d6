"""rmtrace.columns.arrays against the numpy functions it stands in for."""

import os
import subprocess
import sys

import numpy as np
import pytest

from rmtrace import captures
from rmtrace.columns.arrays import distinct, group_numbers, group_rows, within

CAPTURE = captures.path("cuda-streams-3x-sequential")


@pytest.mark.parametrize("values", [
    np.zeros(0, dtype=np.int64), np.array([7], dtype=np.uint32), np.array([3, 1, 3, 2, 1], dtype=np.int64),
    np.array([[2**63 + 5, 1], [1, 2**63 + 5]], dtype=np.uint64),
    np.random.default_rng(13).integers(-50, 50, 10_000).astype(np.int16)])
def test_distinct_is_unique(values: np.ndarray) -> None:
    got, want = distinct(values), np.unique(values)
    assert got.dtype == want.dtype
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize("known", [np.zeros(0, dtype=np.uint64), np.array([1, 5, 2**63 + 1], dtype=np.uint64)])
def test_within_is_isin(known: np.ndarray) -> None:
    values = np.array([0, 1, 2, 5, 6, 2**63 + 1, 2**64 - 1], dtype=np.uint64)
    assert within(values, known).tolist() == np.isin(values, known).tolist()


@pytest.mark.parametrize("columns", [
    [np.zeros(0, dtype=np.int64)],
    [np.array([3, -1, 3, 2, -1], dtype=np.int32), np.array([1, 1, 1, 0, 1], dtype=np.uint8)],
    # spans whose product passes 2**62: the columns are numbered by their distinct values on the way
    [np.array([2**40, 5, 2**40, 5, 7], dtype=np.int64), np.array([-2**40, 3, -2**40, 2**40, 3], dtype=np.int64),
     np.array([1, 2, 1, 2, 1], dtype=np.uint32)],
    list(np.random.default_rng(13).integers(-3, 4, (3, 5_000)))])
@pytest.mark.parametrize("stable", [False, True])
def test_group_rows_is_unique_of_rows(columns: list[np.ndarray], stable: bool) -> None:
    """The groups are np.unique's of the rows (in its order); with ``stable`` each group's rows keep their order."""
    order, bounds = group_rows(columns, stable=stable)
    rows = np.stack([c.astype(np.int64) for c in columns], axis=1)
    want, inverse = np.unique(rows, axis=0, return_inverse=True)
    assert rows[order[bounds[:-1]]].tolist() == want.tolist()
    assert group_numbers(order, bounds).tolist() == inverse.ravel().tolist()
    for g in range(len(bounds) - 1):
        mine = order[bounds[g]:bounds[g + 1]]
        assert sorted(mine.tolist()) == np.flatnonzero(inverse.ravel() == g).tolist()
        if stable:
            assert mine.tolist() == sorted(mine.tolist())


@pytest.mark.parametrize("command", ["stats", "wedges"])
def test_stats_and_wedges_leave_numpy_ma_unimported(tmp_path, command: str) -> None:
    """numpy.ma costs 40-50 ms to import, and only numpy's own np.unique/np.isin paths import it."""
    script = ("import io, contextlib, sys\nfrom rmtrace.cli.main import main\n"
              f"sys.argv = ['rmtrace', {command!r}, '--json', {str(CAPTURE)!r}]\n"
              "with contextlib.redirect_stdout(io.StringIO()):\n"
              "    try:\n        main()\n    except SystemExit:\n        pass\n"
              "print('numpy.ma' in sys.modules)")
    for cache in ("off", str(tmp_path / "cache")):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              env={**os.environ, "RMTRACE_CACHE": cache}, check=True)
        assert done.stdout.split()[-1] == "False", (cache, done.stderr[-2000:])

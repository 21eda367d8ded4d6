"""show's block-at-a-time offsets and durations (rmtrace.columns.timetexts) are timefmt's texts, value by value."""

from __future__ import annotations

import numpy as np
import pytest

from rmtrace.columns.timetexts import EXACT, DurationTexts, offset_texts
from rmtrace.timefmt import format_duration, format_offset


def _near(points: list[int], spread: int = 3) -> np.ndarray:
    """Every value within ``spread`` of each point."""
    return np.array(sorted({p + d for p in points for d in range(-spread, spread + 1)}), dtype=np.int64)


def _values() -> np.ndarray:
    rng = np.random.default_rng(13)
    bounds = [0, 1_000, 10_000, 1_000_000, 1_000_000_000, EXACT]
    # each unit's ties and the values that round up across a unit's boundary (9_999 -> 10.0µs)
    ties = [k * step + step // 2 for step in (100, 1_000, 1_000_000) for k in (1, 7, 99, 100, 999, 12_345)]
    ups = [b - step // 2 for b in bounds[1:] for step in (1, 100, 1_000, 1_000_000)]
    special = _near(bounds + ties + ups + [EXACT * 3, 2**62])
    spread = [rng.integers(0, 10**k, 20_000, dtype=np.int64) for k in (3, 5, 7, 10, 13, 16)]
    return np.concatenate([np.arange(-5, 2_000_000, 1, dtype=np.int64), special, *spread])


def test_offsets_are_format_offset() -> None:
    ns = _values()
    assert offset_texts(ns) == [format_offset(v) for v in ns.tolist()]


def test_durations_are_format_duration() -> None:
    ns = _values()
    texts = DurationTexts()
    shown = np.ones(len(ns), dtype=bool)
    expected = [format_duration(v) for v in ns.tolist()]
    assert texts(ns, shown) == expected
    assert texts(ns, shown) == expected  # from the texts kept
    shown[::3] = False
    assert texts(ns, shown) == [t if s else "" for t, s in zip(expected, shown.tolist())]


def test_durations_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from rmtrace.columns import timetexts
    monkeypatch.setattr(timetexts, "TEXTS_KEPT", 100)
    texts = DurationTexts()
    for start in range(0, 5_000, 1_000):
        ns = np.arange(start, start + 1_000, dtype=np.int64) * 1_000
        assert texts(ns, np.ones(len(ns), dtype=bool)) == [format_duration(v) for v in ns.tolist()]
        assert len(texts._texts) <= 1_000 + 2

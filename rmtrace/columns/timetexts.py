"""``timefmt``'s offsets and durations of a block of calls at once, the same texts made from integers.

``rmtrace show`` prints a time on every line: the call's offset from the
trace's start (``format_offset``) and, for a call that returned, how long it
took (``format_duration``).  Both round a float quotient of the nanoseconds;
called per line they cost about as much as the rest of the line.  Here the
rounding is done on the integers with numpy, a block at a time: a quotient
that is not a tie rounds the same way exactly as through the float (the
float's error is far below the distance to the nearest tie for every value
under ``EXACT``), and the few that are ties, negative or larger are handed to
``timefmt`` itself.  A duration's text depends only on its unit and its
rounded value, which recur from call to call, so each is made once and kept
(``DurationTexts``).  ``tests/test_show_times.py`` compares both with
``timefmt`` on every value near each boundary and tie, and on random ones.
"""

from __future__ import annotations

import numpy as np

from rmtrace.timefmt import format_duration, format_offset

EXACT = 1 << 50
"""Nanoseconds (13 days) under which a float quotient's error (< 1 ns) cannot move a value that is not a
tie across one; from here on ``timefmt`` makes the text."""

_FRACTIONS = [f".{k:03d}ms" for k in range(1000)]


def offset_texts(ns: np.ndarray) -> list[str]:
    """``format_offset`` of each of ``ns`` (int64 nanoseconds)."""
    ns = np.asarray(ns, dtype=np.int64)
    whole, rest = np.divmod(ns, 1000)
    ms, fraction = np.divmod(whole + (rest > 500), 1000)  # microseconds, rounded: a tie goes to timefmt
    fractions = _FRACTIONS
    texts = ["+" + str(m) + fractions[f] for m, f in zip(ms.tolist(), fraction.tolist())]  # 1.3x an f-string
    for i in np.flatnonzero((rest == 500) | (ns < 0) | (ns >= EXACT)).tolist():
        texts[i] = format_offset(int(ns[i]))
    return texts


_UNIT = 1 << 40
"""A duration's code: its unit (``_TEXTS``' index) times this, plus its rounded value in that unit."""
_STEPS = (  # (from ns, rounded in steps of, the text of a rounded value v)
    (0, 1, lambda v: f"{v}ns"),
    (1_000, 100, lambda v: f"{v // 10}.{v % 10}µs"),
    (10_000, 1_000, lambda v: f"{v}µs"),
    (1_000_000, 1_000, lambda v: f"{v // 1000}.{v % 1000:03d}ms"),
    (1_000_000_000, 1_000_000, lambda v: f"{v // 1000}.{v % 1000:03d}s"),
)
_FROM = np.array([s[0] for s in _STEPS], dtype=np.int64)
_STEP = np.array([s[1] for s in _STEPS], dtype=np.int64)
TEXTS_KEPT = 1 << 16
"""Duration texts a ``DurationTexts`` keeps (most durations of a trace are a few thousand codes)."""


class DurationTexts:
    """``format_duration`` of blocks of durations, each text made once per code and kept."""

    def __init__(self) -> None:
        self._texts: dict[int, str] = {}

    def __call__(self, ns: np.ndarray, shown: np.ndarray) -> list[str]:
        """``format_duration`` of each of ``ns`` (int64 nanoseconds) where ``shown``, else ""."""
        ns = np.asarray(ns, dtype=np.int64)
        unit = np.searchsorted(_FROM, ns, side="right") - 1
        step = _STEP[np.maximum(unit, 0)]
        rest = ns % step
        code = unit * _UNIT + ns // step + (2 * rest > step)  # half a step rounds by timefmt: see below
        odd = shown & ((2 * rest == step) | (ns < 0) | (ns >= EXACT))
        code[~shown] = -1
        code[odd] = -2
        texts = self._texts
        codes = code.tolist()
        try:
            out = list(map(texts.__getitem__, codes))
        except KeyError:
            if len(texts) > TEXTS_KEPT:
                texts.clear()
            texts[-1] = texts[-2] = ""
            for c in set(codes).difference(texts):
                texts[c] = _STEPS[c // _UNIT][2](c % _UNIT)
            out = list(map(texts.__getitem__, codes))
        for i in np.flatnonzero(odd).tolist():
            out[i] = format_duration(int(ns[i]))
        return out

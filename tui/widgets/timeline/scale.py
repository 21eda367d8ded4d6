"""Time to columns and back, and which state each column of a lane shows.

Pure functions over numbers, no Textual: the timeline widget draws what these
compute, and the tests check them directly.  Times here are nanoseconds
relative to a run's start, so two runs of a diff share one axis.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rmtrace.timefmt import format_duration

MIN_SPAN_NS = 1_000
"""Zooming stops when a screen shows this many nanoseconds."""


@dataclass(frozen=True)
class Window:
    """The stretch of time ``[t0, t1)`` drawn across ``width`` columns."""

    t0: int
    t1: int
    width: int

    @property
    def span(self) -> int:
        return self.t1 - self.t0

    @property
    def ns_per_col(self) -> float:
        return self.span / max(1, self.width)

    def column(self, t: int) -> int:
        """The column holding time ``t`` (may be outside 0..width-1)."""
        return math.floor((t - self.t0) / self.ns_per_col)

    def time_at(self, col: int) -> int:
        """The first nanosecond of column ``col``."""
        return self.t0 + math.ceil(col * self.ns_per_col)

    def contains(self, t: int) -> bool:
        return self.t0 <= t < self.t1

    def zoomed(self, factor: float, around: int, total: int) -> Window:
        """``factor`` < 1 zooms in; ``around`` keeps its column."""
        span = min(max(MIN_SPAN_NS, self.width, round(self.span * factor)), max(total, self.width))
        frac = (around - self.t0) / self.span if self.span else 0.0
        t0 = round(around - frac * span)
        return Window(t0, t0 + span, self.width).clamped(total)

    def panned(self, cols: float, total: int) -> Window:
        shift = round(cols * self.ns_per_col)
        return Window(self.t0 + shift, self.t1 + shift, self.width).clamped(total)

    def showing(self, t: int, total: int) -> Window:
        """This window moved (not zoomed) just enough that ``t`` is on screen."""
        if self.contains(t):
            return self
        t0 = t - self.span // 2
        return Window(t0, t0 + self.span, self.width).clamped(total)

    def resized(self, width: int) -> Window:
        return Window(self.t0, self.t1, max(1, width))

    def clamped(self, total: int) -> Window:
        """Kept inside ``[0, total]`` where the trace is longer than the window."""
        span = self.span
        t0 = self.t0
        if t0 + span > total:
            t0 = total - span
        t0 = max(0, t0)
        return Window(t0, t0 + span, self.width)


def fit(total: int, width: int) -> Window:
    """The whole run in ``width`` columns (one column past the end so the last event shows)."""
    width = max(1, width)
    span = max(total + max(1, total // width), width, MIN_SPAN_NS)
    return Window(0, span, width)


# --------------------------------------------------------------------------- the ruler

_STEPS = (1, 2, 5)


def tick_step(window: Window, min_cols: int = 14) -> int:
    """A round step (1, 2 or 5 times a power of ten, in ns) at least ``min_cols`` columns apart."""
    want = window.ns_per_col * min_cols
    exp = 10 ** max(0, math.floor(math.log10(max(want, 1))))
    for mult in _STEPS + (10,):
        if mult * exp >= want:
            return mult * exp
    return 10 * exp


def ruler(window: Window, marks: Mapping[int, str] | None = None) -> str:
    """One line: ``|`` at round times with their labels, e.g. ``|0ns    |2.000ms    |4.000ms``.

    ``marks`` (column -> character: a wedge, a divergence) are drawn over
    the ticks; a label that would run into a mark or off the right edge is
    left out, so no label is ever half drawn (``|10.W00s``).
    """
    marks = marks or {}
    line = [" "] * window.width
    step = tick_step(window)
    t = math.ceil(window.t0 / step) * step
    while t < window.t1:
        col = window.column(t)
        if 0 <= col < window.width:
            label = "|" + format_duration(t)
            if col + len(label) > window.width or any(c in marks for c in range(col, col + len(label))):
                label = "|"
            line[col:col + len(label)] = label
        t += step
    for col, char in marks.items():
        if 0 <= col < window.width:
            line[col] = char
    return "".join(line)


# --------------------------------------------------------------------------- lanes


@dataclass(frozen=True)
class LaneIndex:
    """One lane's segments arranged for column queries: bisect, then max over a slice.

    ``keys[i]`` is ``severity << 32 | i``: the max over a column's segments picks
    the most severe state there (the latest on a tie).
    """

    starts: tuple[int, ...]
    reach: tuple[int, ...]
    """Running maximum of segment ends, so bisect works even if segments overlap."""
    keys: tuple[int, ...]
    states: tuple[str, ...]
    ends: tuple[int, ...]
    order: tuple[int, ...]
    """Where each entry was in the segments given to ``build``."""

    @classmethod
    def build(cls, segments: Sequence[tuple[int, int, str]], severity: dict[str, int] | None = None,
              default_severity: int = 1) -> LaneIndex:
        """``segments``: (t0, t1, state) relative to the run's start, in any order."""
        order = sorted(range(len(segments)), key=lambda i: (segments[i][0], segments[i][1]))
        ordered = [segments[i] for i in order]
        reach, top = [], -1
        for _, t1, _ in ordered:
            top = max(top, t1)
            reach.append(top)
        sev = severity or {}
        return cls(
            starts=tuple(s[0] for s in ordered),
            reach=tuple(reach),
            keys=tuple((sev.get(s[2], default_severity) << 32) | i for i, s in enumerate(ordered)),
            states=tuple(s[2] for s in ordered),
            ends=tuple(s[1] for s in ordered),
            order=tuple(order),
        )

    def state_in(self, a: int, b: int) -> int | None:
        """Index of the segment shown for ``[a, b)``, or None when none overlaps it."""
        lo = bisect.bisect_right(self.reach, a)
        hi = bisect.bisect_left(self.starts, b)
        if lo >= hi:
            return None
        return max(self.keys[lo:hi]) & 0xFFFFFFFF

    def cells(self, window: Window) -> list[int | None]:
        """For each column, the index of the segment it shows (None: nothing there)."""
        out: list[int | None] = []
        for col in range(window.width):
            a, b = window.time_at(col), window.time_at(col + 1)
            out.append(self.state_in(a, max(b, a + 1)))
        return out

    def next_change(self, t: int) -> int | None:
        """The first segment start after ``t`` (a lane's next event)."""
        i = bisect.bisect_right(self.starts, t)
        return self.starts[i] if i < len(self.starts) else None

    def previous_change(self, t: int) -> int | None:
        """The last segment start before ``t``."""
        i = bisect.bisect_left(self.starts, t)
        return self.starts[i - 1] if i > 0 else None

"""How each lane state looks: colour and how much it matters when zoomed out.

The session model names the states and gives each one a symbol
(``rmtrace.session.STATE_SYMBOLS``), so a lane reads without colour; this
table adds only presentation.  ``severity`` decides which state a timeline
column shows when several states share it: a brief ``stale`` or ``wedged``
must stay visible at any zoom, a long ``allocated`` need not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class StateLook:
    colour: str
    """A Rich colour for the segment's background."""
    severity: int
    """Higher wins a timeline column shared by several states."""


LOOKS: Mapping[str, StateLook] = {
    "allocated":   StateLook("grey35", 1),
    "bound":       StateLook("dark_cyan", 2),
    "scheduled":   StateLook("steel_blue", 3),
    "registered":  StateLook("blue", 4),
    "published":   StateLook("dark_green", 5),
    "completed":   StateLook("green4", 5),
    "latch_armed": StateLook("dark_olive_green3", 6),
    "waiting":     StateLook("dark_goldenrod", 7),
    "in_flight":   StateLook("dark_orange3", 8),
    "latch_fired": StateLook("orange4", 9),
    "drain_held":  StateLook("magenta", 10),
    "stale":       StateLook("red3", 11),
    "wedged":      StateLook("red", 12),
    "freed":       StateLook("grey23", 0),
    "exited":      StateLook("grey23", 0),
    "running":     StateLook("dark_sea_green4", 2),
    "quiet":       StateLook("dark_slate_gray3", 6),
}

UNKNOWN = StateLook("grey50", 1)
"""A state this TUI has no colour for (a newer model): still drawn, with its symbol."""

OPEN_STATES = frozenset({"in_flight", "waiting", "wedged", "drain_held", "quiet"})
"""States that, still open at the trace's end, are drawn as an open bar (``▶``)."""


def look(state: str) -> StateLook:
    return LOOKS.get(state, UNKNOWN)


def legend(symbols: Mapping[str, str]) -> list[tuple[str, str]]:
    """(symbol, state) pairs in the order of LOOKS, then any state only the model knows."""
    known = [s for s in LOOKS if s in symbols]
    extra = sorted(s for s in symbols if s not in LOOKS)
    return [(symbols[s], s) for s in known + extra]

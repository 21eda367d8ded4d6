"""Durations and timestamps as people type and read them."""

from __future__ import annotations

import re

from rmtrace.errors import RmtraceError

_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "m": 60_000_000_000}
_DURATION = re.compile(r"^\s*(-?\d+(?:\.\d*)?|-?\.\d+)\s*(ns|us|µs|ms|s|m)?\s*$")


def parse_duration(text: str, default_unit: str = "s") -> int:
    """'12.5ms' -> 12500000 ns; a bare number takes ``default_unit``."""
    match = _DURATION.match(text)
    if not match:
        raise RmtraceError(f"not a duration: {text!r} (examples: 250ms, 1.5s, 40us)")
    value, unit = match.groups()
    return round(float(value) * _UNITS[unit or default_unit])


def format_duration(ns: int | float) -> str:
    """A short human duration: 532ns, 41µs, 12.345ms, 3.210s."""
    ns = float(ns)
    a = abs(ns)
    if a < 1_000:
        return f"{ns:.0f}ns"
    if a < 1_000_000:
        return f"{ns / 1_000:.0f}µs" if a >= 10_000 else f"{ns / 1_000:.1f}µs"
    if a < 1_000_000_000:
        return f"{ns / 1_000_000:.3f}ms"
    return f"{ns / 1_000_000_000:.3f}s"


def format_offset(ns: int) -> str:
    """A time relative to the trace start, as strace -r style '+12.345ms'."""
    return f"+{ns / 1_000_000:.3f}ms"

"""The library functions the TUI calls, gathered in one object (harlequin's adapter idea).

The application never reaches into ``rmtrace.session`` or ``rmtrace.analysis``
itself: it is handed a :class:`Services`, and tests hand it one over a small
in-memory model.  :func:`library_services` is the real one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Services:
    load_model: Callable[[str, Any], Any]
    """(path of a trace, its DecoderSet or None) -> its session model (folds the whole trace; a worker thread)."""
    find_wedges: Callable[[Any], Sequence[Any]]
    """Session model -> its wedges, most likely first."""
    first_divergence: Callable[[Any, Any], Any]
    """Two session models -> where they first differ, or None."""
    symbols: Mapping[str, str]
    """Lane state -> one character, so a lane reads without colour."""
    decoders_for: Callable[[Any], Any] | None = None
    """Trace reader -> its DecoderSet, so rows are named before the model is built (cheap; a worker)."""
    row_level: Any = None
    """How deep a row of the events table is decoded (name, status, handles)."""
    full_level: Any = None
    """How deep the field-tree screen decodes (every buffer, field by field)."""


def library_services() -> Services:
    """The session model and analyses of ``rmtrace`` itself."""
    from rmtrace.decoders import decoders_for
    from rmtrace.decoders.base import Level

    from rmtrace.analysis.diff import first_divergence
    from rmtrace.analysis.wedges import find_wedges
    from rmtrace.session import STATE_SYMBOLS, load_session

    return Services(load_model=lambda path, decoders: load_session(path, decoders=decoders), find_wedges=find_wedges,
                    first_divergence=first_divergence, symbols=STATE_SYMBOLS, decoders_for=decoders_for,
                    row_level=Level.CALL, full_level=Level.FULL)

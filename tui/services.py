"""The library functions the TUI calls, gathered in one object (harlequin's adapter idea).

The application never reaches into ``rmtrace.session`` or ``rmtrace.analysis``
itself: it is handed a :class:`Services`, and tests hand it one over a small
in-memory model.  :func:`library_services` is the real one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence


@dataclass(frozen=True)
class Services:
    load_model: Callable[[str], Any]
    """Path of a trace -> its session model (folds the whole trace; runs in a worker thread)."""
    find_wedges: Callable[[Any], Sequence[Any]]
    """Session model -> its wedges, most likely first."""
    first_divergence: Callable[[Any, Any], Any]
    """Two session models -> where they first differ, or None."""
    symbols: Mapping[str, str]
    """Lane state -> one character, so a lane reads without colour."""


def library_services() -> Services:
    """The session model and analyses of ``rmtrace`` itself."""
    from rmtrace.analysis.diff import first_divergence
    from rmtrace.analysis.wedges import find_wedges
    from rmtrace.session import STATE_SYMBOLS, load_session

    return Services(load_model=load_session, find_wedges=find_wedges, first_divergence=first_divergence,
                    symbols=STATE_SYMBOLS)

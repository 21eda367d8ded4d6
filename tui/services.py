"""The library functions the TUI calls, gathered in one object (harlequin's adapter idea).

The application never reaches into ``rmtrace.session`` or ``rmtrace.analysis``
itself: it is handed a :class:`Services`.  :func:`library_services` is the
real one, and the only one: tests run the TUI on real traces folded by the
real model, and swap at most one function for one that waits or fails (the
types below hold them to the real signatures).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmtrace.decoders.base import Level

if TYPE_CHECKING:
    from rmtrace.decoders.decoderset import DecoderSet

    from rmtrace.analysis.diff import Divergence
    from rmtrace.analysis.wedges import Wedge
    from rmtrace.session import SessionModel


@dataclass(frozen=True)
class Services:
    load_model: Callable[[str, DecoderSet | None], SessionModel]
    """(path of a trace, its DecoderSet or None) -> its session model (folds the whole trace; a worker thread)."""
    find_wedges: Callable[[SessionModel], Sequence[Wedge]]
    """Session model -> its wedges, most likely first."""
    first_divergence: Callable[[SessionModel, SessionModel], Divergence | None]
    """Two session models -> where they first differ, or None."""
    symbols: Mapping[str, str]
    """Lane state -> one character, so a lane reads without colour."""
    decoders_for: Callable[[Mapping[str, Any]], DecoderSet] | None = None
    """A trace's metadata -> its DecoderSet, so rows are named before the model is built (cheap; a worker)."""
    row_level: Level = Level.CALL
    """How deep a row of the events table is decoded (name, status, handles)."""
    full_level: Level = Level.FULL
    """How deep the field-tree screen decodes (every buffer, field by field)."""
    load_channels: Callable[[str, DecoderSet | None], tuple[SessionModel, bool] | None] = lambda path, decoders: None
    """(path of a trace, its DecoderSet or None) -> (the part of its model the first screen reads, its lanes and
    wedges, or the whole model when it is at hand; whether it is the whole), when that comes sooner than
    ``load_model``'s whole model (a worker shows a part while ``load_model`` folds the rest); None when it
    would not."""
    keep_model: Callable[[SessionModel], None] = lambda model: None
    """Session model ``load_model`` gave -> it stored in the trace's cache, if it was folded (a worker calls
    this once the lanes, wedges and trees are on screen: the store costs a third of a fold)."""


def library_services() -> Services:
    """The session model and analyses of ``rmtrace`` itself."""
    from rmtrace.decoders import decoders_for

    from rmtrace.analysis.diff import first_divergence
    from rmtrace.analysis.wedges import find_wedges
    from rmtrace.columns.cache import cache_root
    from rmtrace.columns.live import LiveSession
    from rmtrace.columns.modelcache import unkept_channels, unkept_session
    from rmtrace.session import STATE_SYMBOLS
    from rmtrace.session.model import SNAPSHOT_EVERY, fold_channels, fold_session
    from rmtrace.trace import TraceReader, is_finished

    live: dict[str, LiveSession] = {}
    unkept: dict[int, tuple[SessionModel, Callable[[], bool]]] = {}  # by the model's id (the model kept beside)

    def load_model(path: str, decoders: DecoderSet | None) -> SessionModel:
        # a finished trace is folded once (or loaded from the cache, and stored there by keep_model); one
        # still being recorded keeps its fold and each refold continues it (rmtrace.columns.live)
        session = live.get(path)
        if session is None and is_finished(path):
            reader = TraceReader(path)
            model, keep = unkept_session(reader, decoders or decoders_for(reader), SNAPSHOT_EVERY, fold_session)
            unkept[id(model)] = (model, keep)
            return model
        if session is None:
            session = live[path] = LiveSession(path, decoders)
        return session.update()

    def load_channels(path: str, decoders: DecoderSet | None) -> tuple[SessionModel, bool] | None:
        # with the cache on: the whole model when the entry holds one, else the channels' fold (what the
        # wedges read, and the lanes' host-side states: about half the whole fold's time) over the call
        # table, which it builds into the entry, so that load_model's fold then loads it.  Not for a trace
        # still being recorded (its refolds continue one fold), nor with the cache off (the table would be
        # built twice).  A channels' fold is not stored: load_model's whole model, stored by keep_model, follows
        # it, and the store would come before the lanes and wedges are drawn.
        if path in live or not is_finished(path) or cache_root() is None:
            return None
        reader = TraceReader(path)
        model, whole, _ = unkept_channels(reader, decoders or decoders_for(reader), fold_channels)
        return model, whole

    def keep_model(model: SessionModel) -> None:
        found = unkept.pop(id(model), None)
        if found is not None:
            found[1]()

    return Services(load_model=load_model, find_wedges=find_wedges, first_divergence=first_divergence,
                    symbols=STATE_SYMBOLS, decoders_for=decoders_for, load_channels=load_channels,
                    keep_model=keep_model)

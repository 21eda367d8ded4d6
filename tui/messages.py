"""Messages that cross areas of the screen (a widget's own messages live in the widget).

Times are nanoseconds relative to the run's start (see ``rmtrace.tui.view``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from rmtrace.decoders.decoderset import DecoderSet
    from rmtrace.tui.view import Folded

    from rmtrace.analysis.wedges import Wedge


@dataclass
class CursorMoved(Message):
    """The time cursor moved; ``origin`` names the area that moved it, so it does not follow itself."""

    t_rel: int
    origin: str

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, CursorMoved)


@dataclass
class RecordChosen(Message):
    """A record was picked (events table pointer, a wedge); others show its moment."""

    run: int
    seq: int
    t_rel: int
    origin: str

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, RecordChosen)


@dataclass
class ObjectSelected(Message):
    """An RM object was selected in the tree: its lanes light up and the events narrow to it."""

    client_id: str
    handle: int
    label: str
    entities: frozenset[str]
    handles: frozenset[int]


@dataclass
class ObjectCleared(Message):
    """The object selection was dropped."""


@dataclass
class ModelLoaded(Message):
    """A worker finished folding a run (``rmtrace.tui.view.Folded``: lanes, wedges); the app attaches it."""

    run: int
    folded: Folded
    whole: bool = True
    """False for the part of the model the first screen reads (``Services.load_channels``), posted while
    the whole model is still being folded."""


@dataclass
class TreesReady(Message):
    """The worker built the object trees of ``folded`` (after posting it): the Objects tab fills in."""

    run: int
    folded: Folded


@dataclass
class DecodersReady(Message):
    """A worker built a run's decoders: rows get their names before the model is done."""

    run: int
    decoders: DecoderSet


@dataclass
class ModelFailed(Message):
    run: int
    error: str


@dataclass
class TraceGrew(Message):
    """A followed trace has new records."""

    run: int
    added: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, TraceGrew) and message.run == self.run


@dataclass
class WedgeShown(Message):
    """A wedge was jumped to (``w``)."""

    index: int
    wedge: Wedge

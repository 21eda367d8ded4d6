"""Fold records into calls: an enter with its exit, a request with its response.

This is the generic half of pairing and knows nothing about NVIDIA.  A *keyer*
looks at one record and says what it does to pairing (scapy's ``hashret`` /
``answers`` split into one function):

* ``OPEN key``   starts a call (an ENTER, a request sent);
* ``PART key``   belongs to the open call ``key`` but does not end it (one
  record of a multi-record message);
* ``CLOSE key``  ends the open call ``key`` (an EXIT, the last record of a response);
* ``None``       stands alone (an event, a system record, a mark).

``pair_calls`` yields :class:`Call` objects in the order their first record
appears, as strace prints a call at its start with its result folded in.  A
call is held back until it closes, but never for more than ``window``
records: past that it is yielded as UNFINISHED and its later close comes
out on its own as RESUMED (strace's ``<unfinished ...>`` / ``<... resumed>``),
so one wedged call cannot hold the rest of a trace in memory.  Calls still
open when the records run out are IN_FLIGHT: the process was inside them
when the recording stopped.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass

from rmtrace.record import Phase, Record


class Pairing(enum.Enum):
    """What a record does to the pairing of calls."""

    OPEN = "open"
    PART = "part"
    CLOSE = "close"


PairAction = tuple[Pairing, Hashable]
Keyer = Callable[[Record], "PairAction | None"]


class CallState(enum.Enum):
    """How a call was seen."""

    COMPLETE = "complete"      # first and closing record both seen
    SINGLE = "single"          # a record that pairs with nothing (event, message, mark)
    IN_FLIGHT = "in_flight"    # opened, never closed before the records ran out
    UNFINISHED = "unfinished"  # opened, not closed within the window; its close follows as RESUMED
    RESUMED = "resumed"        # a close whose open was yielded earlier or never seen


@dataclass(frozen=True, slots=True)
class Call:
    """One call or message exchange: its records in trace order."""

    records: tuple[Record, ...]
    state: CallState

    @property
    def first(self) -> Record:
        return self.records[0]

    @property
    def last(self) -> Record:
        return self.records[-1]

    @property
    def closed(self) -> bool:
        return self.state in (CallState.COMPLETE, CallState.RESUMED)

    @property
    def duration_ns(self) -> int | None:
        """From the first to the closing record; None when there is no close (or only it)."""
        if self.state is not CallState.COMPLETE:
            return None
        return self.last.time_ns - self.first.time_ns


def call_key(rec: Record) -> PairAction | None:
    """The default keyer: ENTER opens and EXIT closes the call (pid, call_id)."""
    if rec.phase == Phase.ENTER:
        return Pairing.OPEN, (rec.pid, rec.call_id)
    if rec.phase == Phase.EXIT:
        return Pairing.CLOSE, (rec.pid, rec.call_id)
    return None


class _Open:
    """A call whose closing record has not been seen yet."""

    __slots__ = ("key", "records", "closed", "born", "resumed")

    def __init__(self, key: Hashable, rec: Record, born: int, resumed: bool = False) -> None:
        self.key = key
        self.records = [rec]
        self.closed = False
        self.born = born
        self.resumed = resumed

    def call(self, state: CallState) -> Call:
        return Call(tuple(self.records), CallState.RESUMED if self.resumed and state is CallState.COMPLETE else state)


def pair_calls(records: Iterable[Record], keyer: Keyer = call_key, window: int = 65536) -> Iterator[Call]:
    """Calls in order of their first record; see the module docstring."""
    queue: OrderedDict[int, _Open | Call] = OrderedDict()  # position of first record -> call
    open_by_key: dict[Hashable, _Open] = {}
    yielded_open: set[Hashable] = set()  # keys yielded UNFINISHED whose close is still to come
    n = 0

    def drain() -> Iterator[Call]:
        while queue:
            item = next(iter(queue.values()))
            if isinstance(item, Call):
                queue.popitem(last=False)
                yield item
            elif item.closed:
                queue.popitem(last=False)
                yield item.call(CallState.COMPLETE)
            elif n - item.born > window:
                queue.popitem(last=False)
                if open_by_key.get(item.key) is item:  # not superseded by a later open of the same key
                    del open_by_key[item.key]
                    yielded_open.add(item.key)
                yield item.call(CallState.UNFINISHED)
            else:
                return

    for rec in records:
        n += 1
        action = keyer(rec)
        if action is None:
            queue[n] = Call((rec,), CallState.SINGLE)
            yield from drain()
            continue
        kind, key = action
        pending = open_by_key.get(key)
        if kind is Pairing.OPEN:
            yielded_open.discard(key)
            pending = open_by_key[key] = queue[n] = _Open(key, rec, n)
        elif pending is not None:
            pending.records.append(rec)
        elif key in yielded_open or kind is Pairing.PART:
            # the rest of a call yielded UNFINISHED (or whose start was never seen)
            yielded_open.add(key)
            pending = open_by_key[key] = queue[n] = _Open(key, rec, n, resumed=True)
        else:
            queue[n] = Call((rec,), CallState.RESUMED)
        if kind is Pairing.CLOSE and pending is not None:
            pending.closed = True
            del open_by_key[key]
            yielded_open.discard(key)
        yield from drain()
    for item in queue.values():
        if isinstance(item, Call):
            yield item
        else:
            yield item.call(CallState.COMPLETE if item.closed else CallState.IN_FLIGHT)

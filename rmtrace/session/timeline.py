"""Every change as a timestamped transition; state at any time from snapshots.

The fold records transitions as it learns them (a call's effects are known at
its exit, but a call is folded in order of its enter), so ``freeze`` sorts them
by time once.  Everything else is built when first asked for, and only as far
as asked: a model loaded from the cache to draw one screen of lanes should not
pay for the state of every entity at every time.  ``state_at(t)`` is a bisect
to the last snapshot before ``t`` (a copy of every entity's attributes, taken
every ``snapshot_every`` transitions, up to ``t`` only) plus the transitions
since; ``segments(entity)`` reads just that entity's transitions.  No re-read
of the trace.
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
from collections.abc import Sequence
from functools import cached_property
from operator import itemgetter
from typing import Any

from rmtrace.session.entities import Lane, Segment, State, Transition

COUNTERS_ENTITY = "host"

_Change = tuple[int, int, str, str, Any]
"""(t_ns, seq, entity, attr, value): a transition before it is asked for as a ``Transition``."""


class Timeline:
    def __init__(self, snapshot_every: int = 20_000) -> None:
        self.snapshot_every = snapshot_every
        self._pending: list[_Change] = []
        self._changes: list[_Change] = []
        self._times: list[int] = []
        self._snapshots: list[tuple[int, dict[str, dict[str, Any]]]] = [(0, {})]  # (index into changes, state)
        self._snapshot_starts: list[int] = [0]
        self._state: dict[str, dict[str, Any]] = {}
        """Every entity's attributes after the changes up to the last snapshot taken (where the next starts)."""
        self._lock = threading.Lock()  # the TUI asks for state on its UI thread while a worker reads lanes
        self.end_ns = 0

    def set(self, t_ns: int, seq: int, entity: str, attr: str, value: Any) -> None:
        """Record that ``entity.attr`` became ``value`` at ``t_ns`` (record ``seq``)."""
        self._pending.append((t_ns, seq, entity, attr, value))

    def load(self, times: list[int], seqs: Sequence[int], entities: Sequence[str], attrs: Sequence[str],
             values: Sequence[Any], end_ns: int) -> None:
        """Take a frozen timeline's transitions, a column per field, in the order ``freeze`` left them (a
        stored model's): kept as they are, in place of ``set`` per transition and ``freeze``'s sort."""
        self.end_ns = end_ns
        self._changes = list(zip(times, seqs, entities, attrs, values))
        self._times = times
        self._pending = []

    def columns(self) -> dict[str, list[Any]]:
        """A frozen timeline's transitions as ``load`` takes them, a column per ``Transition`` field (for a
        store: no ``Transition`` made per change)."""
        names = [f.name for f in dataclasses.fields(Transition)]  # a change is a Transition's fields in order
        return {name: list(column) for name, column in zip(names, zip(*self._changes))} if self._changes \
            else {name: [] for name in names}

    def freeze(self, end_ns: int) -> None:
        """Sort what the fold recorded (by time, then record; a stable sort keeps the fold's order within
        one record); call once, after the fold."""
        self.end_ns = end_ns
        self._pending.sort(key=itemgetter(0, 1))
        self._changes, self._pending = self._pending, []
        self._times = [change[0] for change in self._changes]

    @cached_property
    def transitions(self) -> Sequence[Transition]:
        """Every transition in time order."""
        return [Transition(*change) for change in self._changes]

    @cached_property
    def _by_entity(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for i, change in enumerate(self._changes):
            out.setdefault(change[2], []).append(i)
        return out

    def state_at(self, t_ns: int) -> State:
        """Every entity's attributes as they were at ``t_ns`` (transitions at ``t_ns`` included)."""
        end = bisect.bisect_right(self._times, t_ns)
        self._snapshot_upto(end)
        k = bisect.bisect_right(self._snapshot_starts, end) - 1
        start, snap = self._snapshots[max(k, 0)]
        return self._state_from({entity: dict(attrs) for entity, attrs in snap.items()}, start, end, t_ns)

    def state_once(self, t_ns: int) -> State:
        """``state_at(t_ns)`` in one pass over the changes, taking no snapshot: for a single question (``rmtrace
        wedges`` asks for the end), where taking every snapshot on the way copies every entity at each."""
        return self._state_from({}, 0, bisect.bisect_right(self._times, t_ns), t_ns)

    def _state_from(self, state: dict[str, dict[str, Any]], start: int, end: int, t_ns: int) -> State:
        """``state`` (the entities' attributes after change ``start``; updated in place) after the changes up
        to ``end``, as the state at ``t_ns``."""
        _apply(state, self._changes[start:end])
        counters = {k: v for k, v in state.get(COUNTERS_ENTITY, {}).items() if isinstance(v, int)}
        return State(t_ns, state, counters)

    def _snapshot_upto(self, end: int) -> None:
        """Take the snapshots due at or before change ``end`` that are not taken yet."""
        every = self.snapshot_every
        if self._snapshot_starts[-1] + every > end:
            return
        with self._lock:
            state = self._state
            i = self._snapshot_starts[-1]
            while i + every <= end:
                _apply(state, self._changes[i:i + every])
                i += every
                self._snapshots.append((i, {k: dict(v) for k, v in state.items()}))
                self._snapshot_starts.append(i)

    def history(self, entity: str) -> Sequence[Transition]:
        return [Transition(*self._changes[i]) for i in self._by_entity.get(entity, ())]

    def segments(self, entity: str, attr: str = "state") -> tuple[Segment, ...]:
        """The entity's ``attr`` as consecutive segments; the last runs to the end of the trace."""
        changes = self._changes
        out: list[Segment] = []
        current: tuple[int, str, str] | None = None
        for i in self._by_entity.get(entity, ()):
            t, _, _, which, value = changes[i]
            if which == "detail":
                if current is not None:
                    current = (current[0], current[1], str(value))
                continue
            if which != attr:
                continue
            if current is not None:
                if current[1] == value:
                    continue
                if t > current[0]:  # several changes at one instant: only the last shows
                    out.append(Segment(current[0], t, current[1], current[2]))
            current = (t, str(value), "")
        if current is not None:
            out.append(Segment(current[0], max(self.end_ns, current[0]), current[1], current[2]))
        return tuple(out)

    def lane(self, entity: str, kind: str, group: str, label: str) -> Lane:
        return Lane(entity, kind, group, label, self.segments(entity))


def _apply(state: dict[str, dict[str, Any]], changes: Sequence[_Change]) -> None:
    """Each of ``changes`` in turn onto ``state``."""
    for _, _, entity, attr, value in changes:
        state.setdefault(entity, {})[attr] = value

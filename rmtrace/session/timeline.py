"""Every change as a timestamped transition; state at any time from snapshots.

The fold records transitions as it learns them (a call's effects are known at
its exit, but a call is folded in order of its enter), so ``freeze`` sorts them
by time once, then takes a snapshot of every entity's attributes every
``snapshot_every`` transitions.  ``state_at(t)`` is a bisect to the last
snapshot before ``t`` plus the transitions since: no re-read of the trace.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from rmtrace.session.entities import Lane, Segment, State, Transition

COUNTERS_ENTITY = "host"


class Timeline:
    def __init__(self, snapshot_every: int = 20_000) -> None:
        self.snapshot_every = snapshot_every
        self._pending: list[tuple[int, int, str, str, Any]] = []
        self.transitions: list[Transition] = []
        self._times: list[int] = []
        self._snapshots: list[tuple[int, dict[str, dict[str, Any]]]] = []  # (index into transitions, state)
        self._snapshot_starts: list[int] = []
        self._by_entity: dict[str, list[int]] = {}
        self.end_ns = 0

    def set(self, t_ns: int, seq: int, entity: str, attr: str, value: Any) -> None:
        """Record that ``entity.attr`` became ``value`` at ``t_ns`` (record ``seq``)."""
        self._pending.append((t_ns, seq, entity, attr, value))

    def freeze(self, end_ns: int) -> None:
        """Sort what the fold recorded and build the snapshots; call once, after the fold."""
        self.end_ns = end_ns
        self._pending.sort(key=lambda x: (x[0], x[1]))
        state: dict[str, dict[str, Any]] = {}
        self._snapshots.append((0, {}))
        for i, (t, seq, entity, attr, value) in enumerate(self._pending):
            if i and i % self.snapshot_every == 0:
                self._snapshots.append((i, {k: dict(v) for k, v in state.items()}))
            state.setdefault(entity, {})[attr] = value
            self.transitions.append(Transition(t, seq, entity, attr, value))
            self._times.append(t)
            self._by_entity.setdefault(entity, []).append(i)
        self._pending = []
        self._snapshot_starts = [i for i, _ in self._snapshots]

    def state_at(self, t_ns: int) -> State:
        """Every entity's attributes as they were at ``t_ns`` (transitions at ``t_ns`` included)."""
        end = bisect.bisect_right(self._times, t_ns)
        k = bisect.bisect_right(self._snapshot_starts, end) - 1
        start, snap = self._snapshots[max(k, 0)]
        state = {entity: dict(attrs) for entity, attrs in snap.items()}
        for tr in self.transitions[start:end]:
            state.setdefault(tr.entity, {})[tr.attr] = tr.value
        counters = {k: v for k, v in state.get(COUNTERS_ENTITY, {}).items() if isinstance(v, int)}
        return State(t_ns, state, counters)

    def history(self, entity: str) -> Sequence[Transition]:
        return [self.transitions[i] for i in self._by_entity.get(entity, ())]

    def segments(self, entity: str, attr: str = "state") -> tuple[Segment, ...]:
        """The entity's ``attr`` as consecutive segments; the last runs to the end of the trace."""
        changes = [(tr.t_ns, tr.value, tr.attr) for tr in self.history(entity) if tr.attr in (attr, "detail")]
        out: list[Segment] = []
        current: tuple[int, str, str] | None = None
        for t, value, which in changes:
            if which == "detail":
                if current is not None:
                    current = (current[0], current[1], str(value))
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

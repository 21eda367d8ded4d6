"""Putting records from many rings in time order, and pairing calls.

Each ring is in time order on its own (one writer); across rings a record
can be published a little after another ring's later record.  ``TimeMerger``
holds records back for a lag window and releases those older than
``now - lag`` in time order (a k-way merge through one heap); at the end it
releases everything.  A record that still arrives behind one already
released (a producer stopped mid-write for longer than the lag) is released
at once and counted as late.

``CallTracker`` follows ENTER and EXIT records by (pid, call id) to name the
calls still in flight when recording stops.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass
from typing import Any

from rmtrace.record import RECORD, Phase, Source


class TimeMerger:
    def __init__(self, lag_ns: int) -> None:
        self.lag_ns = lag_ns
        self._heap: list[tuple[int, int, Any]] = []
        self._order = itertools.count()
        self._released_ns = 0
        self.late = 0

    def push(self, time_ns: int, item: Any) -> None:
        heapq.heappush(self._heap, (time_ns, next(self._order), item))

    def __len__(self) -> int:
        return len(self._heap)

    def release(self, now_ns: int | None = None) -> list[Any]:
        """Records older than now - lag (all of them when now is None), oldest first."""
        limit = None if now_ns is None else now_ns - self.lag_ns
        out = []
        heap = self._heap
        while heap and (limit is None or heap[0][0] <= limit):
            time_ns, _n, item = heapq.heappop(heap)
            if time_ns < self._released_ns:
                self.late += 1
            else:
                self._released_ns = time_ns
            out.append(item)
        return out


@dataclass(frozen=True)
class OpenCall:
    """An ENTER written to the trace whose EXIT has not been seen."""

    seq: int
    time_ns: int
    pid: int
    tid: int
    call_id: int
    source: int
    op: int
    fd: int


PAIRED_SOURCES = frozenset((Source.RM, Source.UVM, Source.SYS))
_CALL_FIELDS = RECORD.getter("source", "phase", "time_ns", "pid", "tid", "call_id", "op", "fd")


class CallTracker:
    def __init__(self) -> None:
        self._open: dict[tuple[int, int], OpenCall] = {}
        self.unmatched_exits = 0

    def saw(self, seq: int, header: tuple) -> None:
        """A record written at seq, given as its raw header tuple (rmtrace.record.HEADER)."""
        source, phase, time_ns, pid, tid, call_id, op, fd = _CALL_FIELDS(header)
        if source not in PAIRED_SOURCES:
            return
        key = (pid, call_id)
        if phase == Phase.ENTER:
            self._open[key] = OpenCall(seq, time_ns, pid, tid, call_id, source, op, fd)
        elif phase == Phase.EXIT and self._open.pop(key, None) is None:
            self.unmatched_exits += 1

    def in_flight(self) -> list[OpenCall]:
        return sorted(self._open.values(), key=lambda c: c.seq)

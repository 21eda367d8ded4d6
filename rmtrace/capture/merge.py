"""Putting records from many rings in time order, and pairing calls.

Each ring is in time order on its own (one writer); across rings a record
can be published long after another ring's later record: its thread took
its time and was descheduled before publishing it.  So the merge waits on
each ring, not on a clock: ``Watermark`` gives each ring a floor (nothing
it publishes from now on is older), from the ``writing`` stamp its producer
keeps (kmod_shim/rmtrace_ring.h, *time order*), and ``TimeMerger`` releases
the records at or below the smallest floor, oldest first (a k-way merge
through one heap); at the end it releases everything.  A stream that keeps
no stamp (the kernel shim's) is given a floor of now minus a lag instead.

A ring that stays inside one record for longer than the stall limit is no
longer waited for (counted in ``Watermark.stalls``); its record, when it
comes, is behind records already released: it is released at once and
counted as late (``TimeMerger.late``).

``CallTracker`` follows ENTER and EXIT records by (pid, call id) to name the
calls still in flight when recording stops.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from typing import Any, NamedTuple

from rmtrace.record import RECORD, Phase, Source

ANNOUNCE_SLACK_NS = 1_000_000
"""How far below the recorder's clock an idle ring's floor lies: the time a producer's ``writing``
store may take to become visible after it read the clock (a store buffer drains in well under a
microsecond), and any skew between two CPUs' reads of CLOCK_MONOTONIC."""


class Watermark:
    """Each ring's floor, from its ``writing`` stamp read before the ring was drained."""

    def __init__(self, stall_ns: int, slack_ns: int = ANNOUNCE_SLACK_NS) -> None:
        self.stall_ns = stall_ns
        self.slack_ns = slack_ns
        self.stalls = 0
        """Records the merge stopped waiting for (one per ring and stamp)."""
        self._given_up: dict[Hashable, int] = {}

    def idle_floor(self, now_ns: int) -> int:
        """The floor of a ring seen idle at now_ns (and of a ring not made yet: it announces its first
        record after it is made, so after a scan of the session that started at now_ns missed it)."""
        return now_ns - self.slack_ns

    def floor(self, ring: Hashable, writing_ns: int, now_ns: int) -> int | None:
        """The floor of ``ring``, whose ``writing`` stamp was writing_ns at now_ns (read before its
        drain), or None when the merge no longer waits for it (a record in the writing longer than
        the stall limit)."""
        if not writing_ns:
            self._given_up.pop(ring, None)
            return self.idle_floor(now_ns)
        if now_ns - writing_ns <= self.stall_ns:
            return writing_ns
        if self._given_up.get(ring) != writing_ns:
            self._given_up[ring] = writing_ns
            self.stalls += 1
        return None

    def forget(self, ring: Hashable) -> None:
        """A retired ring."""
        self._given_up.pop(ring, None)


class TimeMerger:
    def __init__(self, lag_ns: int = 0) -> None:
        self.lag_ns = lag_ns
        """How far below the time given to ``release`` records are released: 0 when it is a watermark."""
        self._heap: list[tuple[int, int, Any]] = []
        self._order = itertools.count()
        self._released_ns = 0
        self.late = 0

    def push(self, time_ns: int, item: Any) -> None:
        heapq.heappush(self._heap, (time_ns, next(self._order), item))

    def __len__(self) -> int:
        return len(self._heap)

    def release(self, now_ns: int | None = None) -> list[Any]:
        """Records at or below now - lag (all of them when now is None), oldest first."""
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


class OpenCall(NamedTuple):
    """An ENTER written to the trace whose EXIT has not been seen (a NamedTuple: one is made per ENTER, and
    making the class costs a tenth of a frozen dataclass's at every recorder's start)."""

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

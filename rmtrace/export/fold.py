"""The session model's fold, streaming: what an export needs of it, without keeping the trace in memory.

``load_session`` keeps every call and every transition, so that any question
can be asked later.  An export asks each question once, in order: which
client made this call, what a channel or
a rank became, what the host counters read.  ``StreamingFold`` runs the same
``Folder`` (one call at a time, the same handlers) and hands each call's
``CallInfo`` and each transition out as soon as it is final, then forgets it,
and forgets a client's objects and channels when its process exits
(``Folder.forget_client``), naming the channels' entities in ``retired`` for a
writer that keeps state per entity.

A call's effects carry the time of its exit, but calls are folded in order of
their enter; every later call enters at or after the current one, so a
transition earlier than the current call's first record is final
(``TransitionStream.final``).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterator
from typing import Any

from rmtrace.calls import Call
from rmtrace.decoders import DecoderSet
from rmtrace.record import Source, SysOp
from rmtrace.session import CallInfo, Transition
from rmtrace.session.fold import Folder
from rmtrace.session.timeline import Timeline


class TransitionStream(Timeline):
    """A Timeline that keeps a transition only until it is final, then hands it out in time order
    (with ``keep`` False, not at all: for a caller that reads none)."""

    def __init__(self, keep: bool = True) -> None:
        super().__init__()
        self.keep = keep
        self._heap: list[tuple[int, int, int, str, str, Any]] = []
        self._n = 0
        self.pending: Counter[str] = Counter()
        """Transitions not yet handed out, per entity (a writer holds a forgotten entity's state until none)."""

    def set(self, t_ns: int, seq: int, entity: str, attr: str, value: Any) -> None:
        if not self.keep:
            return
        heapq.heappush(self._heap, (t_ns, seq, self._n, entity, attr, value))  # _n keeps equal times in fold order
        self._n += 1
        self.pending[entity] += 1

    def final(self, before_ns: int | None = None) -> Iterator[Transition]:
        """Transitions earlier than ``before_ns`` (all of them when None), in time order, removed."""
        heap = self._heap
        while heap and (before_ns is None or heap[0][0] < before_ns):
            t, seq, _n, entity, attr, value = heapq.heappop(heap)
            left = self.pending[entity] - 1
            if left:
                self.pending[entity] = left
            else:
                del self.pending[entity]
            yield Transition(t, seq, entity, attr, value)


class StreamingFold:
    """The session fold over calls given one at a time; per call, its CallInfo."""

    def __init__(self, decoders: DecoderSet, transitions: bool = True) -> None:
        """``transitions``: False for a caller that reads only each call's CallInfo (the tests' call-by-call
        reference for parquet, whose rows now come from the call table), so that the fold's transitions,
        which nobody would take out, are not kept."""
        self.transitions = TransitionStream(keep=transitions)
        self.folder = Folder(decoders, self.transitions)
        self._exited: list[tuple[int, int]] = []  # (time, pid) of exits not yet forgotten
        self._released_before = 0
        self.retired: list[str] = []
        """Entities of forgotten clients (their channels): no transition is made for one any more, though
        some may still be pending (``transitions.pending``); a writer that keeps state per entity drops it
        then, and removes the entity from this list."""

    def fold(self, call: Call) -> CallInfo:
        """Fold one call (in the decoders' order) and return what the model knows of it."""
        folder = self.folder
        # exits whose transitions the caller has had (all before the previous call's first record)
        while self._exited and self._exited[0][0] < self._released_before:
            self._forget(heapq.heappop(self._exited)[1])
        folder.fold(call)
        info = folder.calls.pop()  # the fold appends exactly this call's CallInfo
        # what only a whole-trace model needs: record -> client, the GSP exchange list, the stray frees
        folder.seq_client.clear()
        folder.gsp.clear()
        folder.stray_frees.clear()
        first = call.first
        if first.source == Source.SYS and first.op == SysOp.EXIT:
            heapq.heappush(self._exited, (call.last.time_ns, first.pid))
        self._released_before = first.time_ns
        return info

    def _forget(self, pid: int) -> None:
        """A process exited: its client makes no more calls, so the fold drops what it kept of it
        (the fold has freed its objects, and the caller has had their transitions), keeping memory to what is live."""
        retired = self.folder.forget_client(pid)
        if self.transitions.keep:
            self.retired.extend(retired)

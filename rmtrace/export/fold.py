"""The session model's fold over the call table, as a stream: what Perfetto's state tracks need, in call order.

``load_session`` keeps every object, channel and transition, so that any
question can be asked later.  An export asks each question once, in order:
what a channel or a rank became, what the host counters read, what a
process and a channel are called.  ``TableStream`` reads the trace's call
table (``rmtrace.columns.cache.call_table``: built, or loaded from the
cache) a block of rows at a time, folds the block with the columnar fold
(``rmtrace.columns.fold``: Python only for the calls that change the model,
their records read again only where their rows do not say enough), and
hands each transition out once it is final, then forgets it; a client's
objects and channels are forgotten once its process has exited
(``Folder.forget_client``), its channels' entities named in ``retired`` for
a writer that keeps state per entity.  What is held is what is live, not
what the trace has been.

A call's effects carry the time of its exit, but calls come in order of
their enter; every later call enters at or after the current one, so a
transition earlier than the current call's first record is final
(``TransitionStream.final``).  A transition is handed out once the call that
made it has come (``TableStream.before``), as a fold one call at a time
would hand it out: the fold of a block runs ahead of the calls, its
transitions held until their calls come.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from rmtrace.calls import Call
from rmtrace.columns.arrays import within
from rmtrace.columns.cache import call_table
from rmtrace.columns.collector import young_collections
from rmtrace.columns.fold import TableFold
from rmtrace.decoders import DecoderSet
from rmtrace.record import Source, SysOp
from rmtrace.semantics import events as ev
from rmtrace.session import Transition
from rmtrace.session.entities import Channel
from rmtrace.session.fold import Folder
from rmtrace.session.planned import client_ids
from rmtrace.session.timeline import COUNTERS_ENTITY, Timeline
from rmtrace.trace import TraceReader

BLOCK_ROWS = 16_384
"""Rows folded and written together: the fold's arrays and the block's transitions are what one block holds."""
STATE_ENTITIES = ("chan/", "rank/")
"""Entities of the fold whose ``state`` is a track (clients are their threads' calls)."""


def tracked(entity: str) -> bool:
    """Whether a writer of state tracks reads ``entity``'s transitions: a channel's, a rank's, the host counters."""
    return entity == COUNTERS_ENTITY or entity.startswith(STATE_ENTITIES)


class TransitionStream(Timeline):
    """A Timeline that keeps a transition only until it is final, then hands it out in time order."""

    def __init__(self) -> None:
        super().__init__()
        self._heap: list[tuple[int, int, int, str, str, Any]] = []
        self._n = 0
        self.pending: Counter[str] = Counter()
        """Transitions not yet handed out, per entity (a writer holds a forgotten entity's state until none)."""
        self.engines: dict[str, Any] = {}
        """Each channel's engine as its allocation named it (its ``engine`` transition), until the channel is
        forgotten: what a track is named with, whatever a later BIND, folded before the track is named, set."""

    def set(self, t_ns: int, seq: int, entity: str, attr: str, value: Any) -> None:
        heapq.heappush(self._heap, (t_ns, seq, self._n, entity, attr, value))  # _n keeps equal times in fold order
        self._n += 1
        self.pending[entity] += 1
        if attr == "engine":
            self.engines.setdefault(entity, value)

    def channel(self, entity: str, chan: Channel | None) -> Channel | None:
        """``chan``, the fold's channel of ``entity`` now, with the engine its allocation gave it."""
        if chan is None:
            return None
        engine = self.engines.get(entity, chan.engine)
        return chan if engine == chan.engine else dataclasses.replace(chan, engine=engine)

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


class _Staged(Timeline):
    """The fold's timeline while it folds a block: the tracked transitions in fold order, kept until
    their calls come (``TableStream.before``)."""

    def __init__(self) -> None:
        super().__init__()
        self.made: list[tuple[int, int, str, str, Any]] = []

    def set(self, t_ns: int, seq: int, entity: str, attr: str, value: Any) -> None:
        if tracked(entity):
            self.made.append((t_ns, seq, entity, attr, value))


class TableStream:
    """The call table's rows a block at a time, the fold's transitions handed out as they become final."""

    def __init__(self, reader: TraceReader, decoders: DecoderSet, block_rows: int = BLOCK_ROWS) -> None:
        self.reader = reader
        self.table = call_table(reader, decoders)
        self._staged = _Staged()
        self.folder = Folder(decoders, self._staged, client_ids(reader.meta))
        self._fold = TableFold(self.folder, reader)
        self.block_rows = block_rows
        self.transitions = TransitionStream()
        self.retired: list[str] = []
        """Entities of forgotten clients (their channels): no transition is made for one any more, though
        some may still be pending (``transitions.pending``); a writer that keeps state per entity drops it
        then, and removes the entity from this list."""
        self._argv: dict[int, tuple[int, tuple[str, ...]]] = {}  # pid -> (seq of its last exec, argv)
        self._exited: list[tuple[int, int, int]] = []  # (time, pid, seq) of exits not yet forgotten
        self._released_before = 0
        self._held: list[tuple[int, tuple[int, int, str, str, Any]]] = []  # (row, transition) of the block, by row
        self._next_held = 0

    def blocks(self) -> Iterator[tuple[int, int]]:
        """Each block of rows (start, stop), once folded; between blocks the caller takes each row in
        turn (``before``, then ``after``)."""
        table = self.table
        for start in range(0, len(table), self.block_rows):
            stop = min(start + self.block_rows, len(table))
            with young_collections():  # every row is final: fold the block's own (processes' and clients' ends left)
                self._fold.advance(table, final=True, until=stop)
            folder = self.folder
            folder.gsp.clear()  # what only a whole-trace model needs: the GSP exchange list, the stray frees
            folder.stray_frees.clear()
            self._hold(start, stop)
            yield start, stop

    def _hold(self, start: int, stop: int) -> None:
        """The block's transitions, each with the row whose call made it (its record's), in fold order."""
        made, self._staged.made = self._staged.made, []
        c = self.table.columns
        seqs = np.array(sorted({seq for _t, seq, *_rest in made}), dtype=np.int64)
        row_of: dict[int, int] = {}
        for column in ("exit_seq", "enter_seq"):  # a call's first record wins over an exit of no call of its own
            values = np.asarray(c[column][start:stop]).astype(np.int64)
            hit = np.flatnonzero(within(values, seqs))  # seqs: sorted, distinct
            row_of.update(zip(values[hit].tolist(), (start + hit).tolist()))
        for row, parts in self.table.members.items():
            if start <= row < stop:
                row_of.update((seq, row) for seq, _t in parts)
        held = [(row_of.get(tr[1], start), tr) for tr in made]
        held.sort(key=lambda item: item[0])  # stable: a call's transitions stay in fold order
        self._held, self._next_held = held, 0

    def before(self, row: int, first_ns: int) -> Iterator[Transition]:
        """Row ``row`` (its first record at ``first_ns``) comes next: the transitions final before it."""
        while self._exited and self._exited[0][0] < self._released_before:
            _t, pid, seq = heapq.heappop(self._exited)
            self._forget(pid, seq)
        held, at = self._held, self._next_held
        while at < len(held) and held[at][0] <= row:
            self.transitions.set(*held[at][1])
            at += 1
        self._next_held = at
        return self.transitions.final(first_ns)

    def after(self, source: int, op: int, pid: int, seq: int, first_ns: int, last_ns: int) -> None:
        """A row (its first record ``seq``) has been written: a process's exit has its client forgotten once the
        exit's transitions are out."""
        if source == Source.SYS and op == SysOp.EXIT:
            heapq.heappush(self._exited, (last_ns, pid, seq))
        self._released_before = first_ns

    def executed(self, pid: int, call: Call) -> None:
        """An exec of ``pid``: what the process is called from now on (its argv)."""
        executed = self.folder.interpreter.interpret(call).first(ev.ProcessExecuted)
        if executed is not None:
            self._argv[pid] = (call.first.seq, executed.argv)

    def _forget(self, pid: int, seq: int) -> None:
        """A process exited at ``seq``: it makes no more calls, so the fold drops what it kept of it (the fold
        has freed its objects, and the caller has had their transitions), keeping memory to what is live.  The
        fold has run ahead: what a new process given the same pid made since is kept."""
        argv = self._argv.get(pid)
        if argv is not None and argv[0] <= seq:  # an exec after the exit is the new process's: its name stays
            del self._argv[pid]
        retired = self.folder.forget_client(pid, through_seq=seq)
        for entity in retired:
            self.transitions.engines.pop(entity, None)
        self.retired.extend(retired)

    def finish(self) -> Iterator[Transition]:
        """Every transition not yet handed out."""
        for _row, tr in self._held[self._next_held:]:
            self.transitions.set(*tr)
        self._held = []
        return self.transitions.final()

    # -- what a writer names its tracks with

    def argv(self, pid: int) -> Sequence[str]:
        """The command line of process ``pid`` as its last exec so far gave it (none before, or once forgotten)."""
        argv = self._argv.get(pid)
        return () if argv is None else argv[1]

    def channel(self, entity: str) -> Channel | None:
        """The channel of entity ``chan/ID`` while the fold has it, with the engine its allocation gave it (the
        fold runs ahead of the writer: a BIND it has folded since may have set another)."""
        return self.transitions.channel(entity, self.folder.channels.get(entity.removeprefix("chan/")))

    def client_pid(self, client_id: str) -> int | None:
        client = self.folder.clients.get(client_id)
        return client.pid if client is not None else None


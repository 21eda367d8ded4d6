"""``SessionModel``: a trace folded into state over time; ``load_session`` builds one.

The trace's calls are its call table (``rmtrace.columns``: built from the
chunks with numpy, or loaded from the cache), and the fold runs over the table
(``rmtrace.columns.fold``): Python only for the calls that change the model.
After that every question ("state at t", "history of channel X", "which client
is record N") is answered from memory.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from rmtrace.decoders import DecoderSet, decoders_for
from rmtrace.session.entities import (
    CallInfo,
    Channel,
    Client,
    FreedBy,
    GspExchange,
    Lane,
    LaneState,
    Process,
    Rank,
    RmObject,
    State,
    Transition,
)
from rmtrace.session.planned import client_ids
from rmtrace.session.timeline import Timeline
from rmtrace.trace import Recovery, TraceReader

SNAPSHOT_EVERY = 20_000
"""Transitions between the timeline's snapshots (``Timeline``): "state at t" replays at most this many."""
LIVE = "live"
"""``Recovery.reason`` of a trace still being written (read as it grows): not cut, only unfinished."""

# the call table's module reads the session's entities, and the fold and the objects' module bring the
# semantic layer's events and interpreter (25 ms of a warm ``stats``, which folds nothing): imported where used
if TYPE_CHECKING:
    from rmtrace.columns.table import CallTable
    from rmtrace.session.fold import Folder
    from rmtrace.session.objects import ObjectColumns


class SessionModel:
    """Processes, clients, RM objects, channels, ranks, calls and their history."""

    def __init__(self, reader: TraceReader, decoders: DecoderSet, folder: Folder, timeline: Timeline,
                 start_ns: int, end_ns: int, table: CallTable) -> None:
        self.reader = reader
        self.meta: Mapping[str, Any] = reader.meta
        self.decoders = decoders
        self.start_ns, self.end_ns = start_ns, end_ns
        self.processes: Mapping[int, Process] = folder.processes
        self.clients: tuple[Client, ...] = tuple(folder.clients.values())
        self._clients = folder.clients
        self.objects: Mapping[tuple[str, int], RmObject] = folder.objects
        self.object_list: Sequence[RmObject] = folder.object_list
        self.channels: Mapping[str, Channel] = folder.channels
        self.ranks: Mapping[str, Rank] = folder.ranks
        from rmtrace.columns.table import TableCalls
        self.table = table
        """The calls as columns (``rmtrace.columns.table``), for questions about all of them at once."""
        self.calls: Sequence[CallInfo] = TableCalls(table)
        self.gsp: Sequence[GspExchange] = folder.gsp
        self.stray_frees: Sequence[CallInfo] = folder.stray_frees
        self.stop_reason = folder.stop_reason
        self.lost = folder.lost
        self.marked_in_flight: frozenset[tuple[int, int]] = frozenset(folder.marked_in_flight)
        self.recovery: Recovery = reader.recovery
        self.timeline = timeline
        label_clients(self.clients, self.processes)

    @property
    def cut(self) -> bool:
        """The recording ended abruptly: the trace was recovered (no intact footer: the recorder was
        killed, the file torn), so what was in flight at its end may well have returned after."""
        return not self.recovery.complete and self.recovery.reason != LIVE

    def cut_short(self, call: CallInfo) -> bool:
        """``call`` was in flight when the recording was cut, and the recorder never said it still was."""
        return call.in_flight and self.cut and (call.pid, call.call_id) not in self.marked_in_flight

    # -- lookups

    def client(self, client_id: str) -> Client:
        return self._clients[client_id]

    def client_of(self, seq: int) -> str | None:
        seqs, owners = self._record_clients
        i = int(np.searchsorted(seqs, seq))
        return self.table.client_id(int(owners[i])) if i < len(seqs) and seqs[i] == seq else None

    def client_seqs(self, client_id: str) -> Sequence[int]:
        seqs, owners = self._record_clients
        return seqs[owners == self.table.client_index(client_id)].tolist()

    @cached_property
    def _record_clients(self) -> tuple[np.ndarray, np.ndarray]:
        """(seqs, client indexes) of every record of a client (``CallTable.record_clients``), made when first
        asked: 12 bytes a record, which wedges and stats never ask for."""
        return self.table.record_clients()

    def calls_of(self, client_id: str) -> list[CallInfo]:
        return self.table.infos_at(np.flatnonzero(self.table.columns["client"] == self.table.client_index(client_id)))

    def in_flight_calls(self, sources: Iterable[int] | None = None) -> list[CallInfo]:
        """Calls still in flight at the end of the trace (of ``sources``), in order."""
        rows = self.table.open_rows()
        if sources is not None:
            rows = rows[np.isin(self.table.columns["source"][rows], list(sources))]
        return self.table.infos_at(rows)

    def calls_slower_than(self, ns: int, sources: Iterable[int] | None = None) -> list[CallInfo]:
        """Calls that returned more than ``ns`` after they entered (of ``sources``), in order."""
        c, table = self.table.columns, self.table
        wanted = None if sources is None else np.array(sorted(sources), dtype=np.int64)
        found = []
        for at in range(0, len(table), SLOW_BLOCK):  # a block at a time: every row's latency at once was wedges' peak
            end = min(at + SLOW_BLOCK, len(table))
            slow = (c["exit_seq"][at:end] >= 0) & (c["t_exit"][at:end] - c["t_enter"][at:end] > ns)
            if wanted is not None:
                slow &= np.isin(c["source"][at:end], wanted)
            found.append(at + np.flatnonzero(slow))
            table.release(at, end, ("exit_seq", "t_exit", "t_enter", "source"))
        return table.infos_at(np.concatenate(found) if found else np.zeros(0, dtype=np.int64))

    def source_counts(self, client_id: str | None = None) -> dict[int, int]:
        """Calls per source (of one client, or of the whole trace)."""
        if client_id is None:
            return dict(self._source_counts.get(None, {}))
        index = self.table.client_index(client_id)
        return dict(self._source_counts.get(index, {})) if index >= 0 else {}

    @cached_property
    def _source_counts(self) -> dict[int | None, dict[int, int]]:
        """Calls per source, per client index (None: every call), counted in one pass over the columns."""
        c = self.table.columns
        out: dict[int | None, dict[int, int]] = {}
        pairs = (c["client"].astype(np.int64) << 8) | c["source"].astype(np.int64)
        for pair, n in zip(*(a.tolist() for a in np.unique(pairs, return_counts=True))):
            client, source = pair >> 8, pair & 0xFF
            out.setdefault(client, {})[source] = n
            whole = out.setdefault(None, {})
            whole[source] = whole.get(source, 0) + n
        return out

    def objects_of(self, client_id: str) -> list[RmObject]:
        return self._objects_by_client.get(client_id, [])

    @cached_property
    def _objects_by_client(self) -> dict[str, list[RmObject]]:
        out: dict[str, list[RmObject]] = {}
        for obj in self.object_list:
            out.setdefault(obj.client_id, []).append(obj)
        return out

    def object_counts(self) -> Mapping[str, Mapping[FreedBy | None, int]]:
        """Objects per client id, per how they went (None: not freed)."""
        from rmtrace.session.objects import ObjectList
        if isinstance(self.object_list, ObjectList):  # loaded from the cache: counted in its columns, none made
            return self.object_list.columns.counts()
        by: dict[str, Counter[FreedBy | None]] = defaultdict(Counter)
        for o in self.object_list:
            by[o.client_id][o.freed_by] += 1
        return by

    def leaked(self, client_id: str | None = None) -> list[RmObject]:
        """Objects still allocated at the end of the trace (neither freed nor reclaimed at exit)."""
        return [o for o in self.object_list
                if o.free_ns is None and (client_id is None or o.client_id == client_id)]

    # -- time

    @property
    def transitions(self) -> Sequence[Transition]:
        return self.timeline.transitions

    def history(self, entity: str) -> Sequence[Transition]:
        return self.timeline.history(entity)

    def state_at(self, t_ns: int) -> State:
        return self.timeline.state_at(t_ns)

    def final_state(self) -> State:
        """``state_at(end_ns)``, for one look at the end: no snapshot taken (``Timeline.state_once``)."""
        return self.timeline.state_once(self.end_ns)

    def lanes(self) -> list[Lane]:
        """One lane per client, then per channel (grouped by client), then per rank (the host)."""
        return [self.timeline.lane(*key) for key in self.lane_keys()]

    def lane_keys(self) -> list[tuple[str, str, str, str]]:
        """(entity, kind, group, label) of each of ``lanes``, in their order, without their segments (the
        TUI reads a lane's segments when it draws it: a fleet's trace has thousands of lanes)."""
        out = [(c.entity, "client", c.id, c.label) for c in self.clients]
        for chan in self.channels.values():
            label = f"{chan.id} {chan.handle:#x} {chan.engine or ''}".rstrip()
            out.append((chan.entity, "channel", chan.client_id, label))
        for rank in sorted(self.ranks.values(), key=lambda r: r.index):
            out.append((rank.entity, "rank", "host", f"rank {rank.index}"))
        return out


def label_clients(clients: Iterable[Client], processes: Mapping[int, Process]) -> None:
    """Each client's label: its id, pid and program (``c2 pid 1002 (cuda_streams)``)."""
    for client in clients:
        proc = processes.get(client.pid)
        name = os.path.basename(proc.argv[0]) if proc and proc.argv else ""
        client.label = f"{client.id} pid {client.pid}" + (f" ({name})" if name else "")


class Objects(Protocol):
    """A trace's calls, processes, clients and RM objects: what a ``SessionModel`` has, and what
    ``load_objects`` gives without the rest of the fold."""

    @property
    def table(self) -> CallTable: ...
    @property
    def processes(self) -> Mapping[int, Process]: ...
    @property
    def clients(self) -> tuple[Client, ...]: ...
    @property
    def object_list(self) -> Sequence[RmObject]: ...
    def object_counts(self) -> Mapping[str, Mapping[FreedBy | None, int]]:
        """Objects per client id, per how they went (None: not freed)."""


@dataclass
class ObjectsModel:
    """The part of a trace's model that its calls' rows and a few records make (``fold_table_objects``'s
    ``OBJECTS_ONLY``): the same processes, clients and objects the whole model has, the objects as columns
    (``rmtrace.session.objects``), made into ``RmObject``\\ s only when ``object_list`` is read."""

    table: CallTable
    processes: Mapping[int, Process]
    clients: tuple[Client, ...]
    columns: ObjectColumns

    @cached_property
    def object_list(self) -> Sequence[RmObject]:
        from rmtrace.session.objects import ObjectList
        return ObjectList(self.columns)

    def object_counts(self) -> Mapping[str, Mapping[FreedBy | None, int]]:
        return self.columns.counts()


SLOW_BLOCK = 65_536
"""Rows ``calls_slower_than`` reads at a time."""


def load_objects(source: str | os.PathLike | TraceReader, driver: str | None = None,
                 decoders: DecoderSet | None = None, cache: bool = True) -> Objects:
    """A trace's processes, clients and objects: from the cache entry's model (or objects) when it holds
    them, mapped, else only the fold of the calls that make them, stored there (the call table cached as
    ``load_session`` caches it)."""
    from rmtrace.columns.modelcache import objects
    reader = source if isinstance(source, TraceReader) else TraceReader(source)
    decoders = decoders or decoders_for(reader, override=driver)
    return objects(reader, decoders, fold_objects, cache=cache)


def fold_objects(reader: TraceReader, decoders: DecoderSet, table: CallTable) -> ObjectsModel:
    """The processes, clients and objects of the trace whose call table is ``table``."""
    from rmtrace.columns.fold import fold_table_objects
    from rmtrace.session.fold import Folder
    from rmtrace.session.objects import Ambiguous, ObjectColumns
    folder = Folder(decoders, Timeline(), client_ids(reader.meta))
    try:
        columns = fold_table_objects(folder, table, reader)
    except Ambiguous:  # what the columns' keys cannot tell apart: the whole fold's objects, as columns
        whole = fold_session(reader, decoders, table, SNAPSHOT_EVERY)
        columns = ObjectColumns.from_objects(whole.object_list, [c.id for c in whole.clients])
        return ObjectsModel(table, whole.processes, whole.clients, columns)
    clients = tuple(folder.clients.values())
    label_clients(clients, folder.processes)
    return ObjectsModel(table, folder.processes, clients, columns)


def load_channels(source: str | os.PathLike | TraceReader, driver: str | None = None,
                  decoders: DecoderSet | None = None, cache: bool = True) -> SessionModel:
    """A trace's model as far as its channels, ranks and host state go (``fold_table``'s ``CHANNELS_ONLY``:
    what ``rmtrace.analysis.wedges`` reads): the whole model when the cache holds it, else the channels' model
    it holds, else only the fold of the calls that make those (the call table cached as ``load_session`` caches
    it, and the model in the entry beside: not as the whole model, which ``load_session`` still folds)."""
    from rmtrace.columns.modelcache import channels
    reader = source if isinstance(source, TraceReader) else TraceReader(source)
    decoders = decoders or decoders_for(reader, override=driver)
    return channels(reader, decoders, fold_channels, cache=cache)


def fold_channels(reader: TraceReader, decoders: DecoderSet, table: CallTable) -> SessionModel:
    """The model of the trace whose call table is ``table``, as far as ``CHANNELS_ONLY`` goes."""
    return fold_session(reader, decoders, table, SNAPSHOT_EVERY, channels_only=True)


def load_session(source: str | os.PathLike | TraceReader, driver: str | None = None,
                 snapshot_every: int = SNAPSHOT_EVERY, decoders: DecoderSet | None = None,
                 cache: bool = True) -> SessionModel:
    """Fold a trace (a path or an open reader) into a SessionModel; with ``cache``, the model (or at least
    its call table) comes from the trace's cache entry, and goes there (``rmtrace.columns.modelcache``)."""
    from rmtrace.columns.modelcache import session
    reader = source if isinstance(source, TraceReader) else TraceReader(source)
    decoders = decoders or decoders_for(reader, override=driver)
    return session(reader, decoders, snapshot_every, fold_session, cache=cache)


def fold_session(reader: TraceReader, decoders: DecoderSet, table: CallTable, snapshot_every: int,
                 channels_only: bool = False) -> SessionModel:
    """The model of the trace whose call table is ``table`` (``rmtrace.columns.fold``); with
    ``channels_only``, as far as its channels, ranks and host state go (``CHANNELS_ONLY``)."""
    from rmtrace.columns.fold import fold_table
    from rmtrace.session.fold import Folder
    timeline = Timeline(snapshot_every)
    folder = Folder(decoders, timeline, client_ids(reader.meta))
    fold_table(folder, table, reader, channels_only=channels_only)
    span = reader.time_span or (0, 0)
    _mark_open_calls(table.infos_at(table.open_rows()), timeline)
    timeline.freeze(span[1])
    return SessionModel(reader, decoders, folder, timeline, span[0], span[1], table)


def _mark_open_calls(calls: Iterable[CallInfo], timeline: Timeline) -> None:
    """Calls still in flight at the end show on their client's lane from their enter on."""
    for call in calls:
        if call.in_flight and call.client_id is not None:
            entity = f"client/{call.client_id}"
            timeline.set(call.t_enter, call.enter_seq, entity, "state", LaneState.IN_FLIGHT)
            timeline.set(call.t_enter, call.enter_seq, entity, "detail", call.full_name)

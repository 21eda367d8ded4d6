"""What the TUI's widgets see of one run: the trace through its index at once, the session model once folded.

A :class:`RunView` answers every question a widget asks (rows of the events
table, lanes, state at a time, objects, wedges) so that no widget opens a
file or knows the model's shape (habit 8).  It is usable the moment the trace
is opened: the index gives the time span, the record count and any record by
sequence number, which is all the first screen needs.  The session model,
which folds the whole trace, is built by a worker and attached later
(:meth:`RunView.attach`); until then the model-backed answers are empty.

Times handed to widgets are nanoseconds relative to the run's start, so two
runs of a diff share one axis.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
from rmtrace.decoders.render import format_arg
from rmtrace.tui.services import Services
from rmtrace.tui.states import look

from rmtrace.calls import Call, CallState
from rmtrace.record import Phase, Record, Source, enum_name
from rmtrace.timefmt import format_offset
from rmtrace.trace import TraceReader

if TYPE_CHECKING:
    from rmtrace.decoders.base import Decoded
    from rmtrace.decoders.decoderset import DecoderSet
    from rmtrace.tui.filters import EventFilter

    from rmtrace.analysis.wedges import Wedge
    from rmtrace.session import CallInfo, RmObject, SessionModel, State
    from rmtrace.session.objects import ObjectColumns

PHASE_MARKS: Mapping[int, str] = {
    Phase.ENTER: "→", Phase.EXIT: "←", Phase.SEND: "⇢", Phase.RECV: "⇠", Phase.EVENT: "•",
}
"""One character per phase in the operation column."""


@dataclass(frozen=True)
class EventRow:
    """One line of the events table."""

    seq: int
    t_rel: int
    pid: int
    tid: int
    client: str
    source: str
    phase: str
    operation: str
    obj: str
    status: str
    latency_ns: int | None
    error: bool = False
    in_flight: bool = False
    handles: frozenset[int] = frozenset()

    @property
    def text(self) -> str:
        """Everything a text filter or search looks at."""
        return " ".join((self.client, self.source, self.phase, self.operation, self.obj, self.status,
                         f"{self.pid}/{self.tid}", " ".join(f"{h:#x}" for h in sorted(self.handles))))


SegmentRow = tuple[int, int, str, str]
"""(t0, t1, state, detail), relative to the run's start."""


@dataclass(eq=False)
class LaneRow:
    """One timeline lane; its segments are read from the model when first asked for (when the lane is
    drawn or its state is looked at): a fleet's trace has thousands of lanes and a screen shows twenty.
    Not frozen, though nothing changes one: a frozen dataclass's ``__init__`` took 26 ms of the worker for the
    12,524 lanes of 1M records, a plain one 9 ms."""

    entity: str
    kind: str
    group: str
    label: str
    read_segments: Callable[[], tuple[SegmentRow, ...]] = field(repr=False)

    @cached_property
    def segments(self) -> tuple[SegmentRow, ...]:
        return self.read_segments()


@dataclass(frozen=True)
class ObjectNode:
    """One RM object in a client's tree."""

    client_id: str
    handle: int
    class_name: str
    stable_name: str
    alloc_rel: int | None
    free_rel: int | None
    status: str
    children: tuple[ObjectNode, ...] = ()

    @property
    def label(self) -> str:
        if self.alloc_rel is None:
            return f"{self.class_name} {self.handle:#010x}"
        freed = format_offset(self.free_rel) if self.free_rel is not None else "end"
        life = f" {format_offset(self.alloc_rel)}…{freed}"
        return f"{self.class_name} {self.handle:#010x}{life}"


@dataclass
class CallIndex:
    """Calls found by the sequence number of their enter or exit record, in arrays (a trace holds millions)."""

    calls: Sequence[CallInfo]
    by_enter: Sequence[int] = field(default_factory=lambda: array("q"))
    enter_idx: Sequence[int] = field(default_factory=lambda: array("q"))
    by_exit: Sequence[int] = field(default_factory=lambda: array("q"))
    exit_idx: Sequence[int] = field(default_factory=lambda: array("q"))

    @classmethod
    def build(cls, calls: Sequence[CallInfo]) -> CallIndex:
        enters = sorted((c.enter_seq, i) for i, c in enumerate(calls))
        exits = sorted((c.exit_seq, i) for i, c in enumerate(calls) if c.exit_seq is not None)
        return cls(calls, array("q", (s for s, _ in enters)), array("q", (i for _, i in enters)),
                   array("q", (s for s, _ in exits)), array("q", (i for _, i in exits)))

    @classmethod
    def of_model(cls, model: SessionModel) -> CallIndex:
        """The same index from the model's call table, no CallInfo made: its seq columns as they are where
        they are in order already (a table's rows are in enter order, and so, mostly, are its exits), else
        sorted; read through memoryviews (ints to ``bisect``): copying them into arrays took 0.05 s at 1M
        records."""
        c = model.table.columns
        enters = np.asarray(c["enter_seq"], dtype=np.int64)
        exits = np.asarray(c["exit_seq"], dtype=np.int64)
        rows = np.flatnonzero(exits >= 0)
        return cls(model.calls, *_in_order(enters, None), *_in_order(exits[rows], rows))

    def call_at(self, seq: int) -> CallInfo | None:
        for keys, idx in ((self.by_enter, self.enter_idx), (self.by_exit, self.exit_idx)):
            k = bisect.bisect_left(keys, seq)
            if k < len(keys) and keys[k] == seq:
                return self.calls[idx[k]]
        return None


def _in_order(keys: np.ndarray, rows: np.ndarray | None) -> tuple[Sequence[int], Sequence[int]]:
    """``keys`` sorted, and the row of each (``rows[i]`` is the row of ``keys[i]``; None: row ``i``)."""
    if keys.size > 1 and not bool(np.all(keys[1:] >= keys[:-1])):
        order = np.argsort(keys, kind="stable")
        keys, rows = keys[order], order if rows is None else rows[order]
    return keys.data, (np.arange(keys.size, dtype=np.int64) if rows is None else rows).data


@dataclass
class Folded:
    """Everything drawn from a session model, computed off the UI thread (a fold takes seconds, and so
    can finding wedges or building object trees on a large trace)."""

    model: SessionModel
    calls: CallIndex
    lanes: list[LaneRow]
    wedges: list[Wedge]
    start_ns: int
    _trees: dict[str, list[ObjectNode]] | None = None

    @property
    def trees_ready(self) -> bool:
        return self._trees is not None

    def trees(self) -> dict[str, list[ObjectNode]]:
        """The object trees (built on first call: the worker builds them after the lanes and wedges are on
        screen, since they take as long as the rest together on a large trace)."""
        if self._trees is None:
            self._trees = object_trees(self.model, self.start_ns)
        return self._trees


def lane_rows(model: SessionModel, start_ns: int) -> list[LaneRow]:
    """The model's lanes, their segments relative to ``start_ns`` (read when asked for)."""
    def reader(entity: str) -> Callable[[], tuple[SegmentRow, ...]]:
        return lambda: tuple((s.t0 - start_ns, s.t1 - start_ns, s.state, s.detail)
                             for s in model.timeline.segments(entity))
    return [LaneRow(entity, kind, group, label, reader(entity)) for entity, kind, group, label in model.lane_keys()]


def object_trees(model: SessionModel, start_ns: int) -> dict[str, list[ObjectNode]]:
    """Client id -> its root objects, children nested, in allocation order."""
    children: dict[tuple[str, int | None], list[RmObject]] = {}
    handles = set(model.objects)
    for (client_id, _), obj in sorted(model.objects.items(), key=lambda kv: kv[1].alloc_seq):
        parent = obj.parent if (client_id, obj.parent) in handles and obj.parent != obj.handle else None
        children.setdefault((client_id, parent), []).append(obj)

    def node(obj: RmObject) -> ObjectNode:
        return ObjectNode(
            obj.client_id, obj.handle, obj.class_name, obj.stable_name,
            None if obj.alloc_ns is None else obj.alloc_ns - start_ns,
            None if obj.free_ns is None else obj.free_ns - start_ns, obj.status,
            tuple(node(c) for c in children.get((obj.client_id, obj.handle), ())))

    return {c.id: [node(o) for o in children.get((c.id, None), ())] for c in model.clients}


class NewestClasses:
    """(client id, handle) -> the class name of the newest object of that handle, from a model's object
    columns: their (client, handle) keys sorted once, each name found by a binary search when asked.  A dict of
    every object took 0.1 s of the UI thread at 78,723 objects (1M records), on the first screen the model
    draws, for the dozen handles its rows name."""

    def __init__(self, columns: ObjectColumns) -> None:
        self._codes = {client: code for code, client in enumerate(columns.client_ids)}
        handle = np.asarray(columns.handle, dtype=np.int64)
        packed = (np.asarray(columns.client, dtype=np.int64) << 32) | handle  # handles are 32 bits (``fits``)
        self._order = np.argsort(packed, kind="stable")  # equal keys stay in allocation order: the newest last
        self._keys = packed[self._order]
        self._class_name = columns.class_name
        self._names = columns.names

    @staticmethod
    def fits(columns: ObjectColumns) -> bool:
        """Whether every handle is 32 bits, as an NvHandle is (the keys pack client and handle into one number)."""
        handle = np.asarray(columns.handle)
        return not handle.size or (int(handle.min()) >= 0 and int(handle.max()) < 1 << 32)

    def get(self, key: tuple[str, int]) -> str | None:
        code = self._codes.get(key[0])
        if code is None or not 0 <= key[1] < 1 << 32:
            return None
        packed = code << 32 | key[1]
        i = int(np.searchsorted(self._keys, packed, side="right")) - 1
        if i < 0 or int(self._keys[i]) != packed:
            return None
        return self._names[int(self._class_name[int(self._order[i])])]


class RunView:
    """One run (a recording or a replay) as the widgets see it."""

    def __init__(self, reader: TraceReader, services: Services, *, label: str | None = None) -> None:
        self.reader = reader
        self.services = services
        self.path = reader.path
        self.label = label or reader.path.rsplit("/", 1)[-1]
        span = reader.time_span
        self.start_ns = span[0] if span else 0
        self._end_ns = span[1] if span else 0
        self.model: SessionModel | None = None
        self.decoders: DecoderSet | None = None
        """The trace's DecoderSet before the model (which brings its own) is built."""
        self.generation = 0
        """Bumped whenever what the rows show may change (model attached, trace grew)."""
        self._folded: Folded | None = None
        self._children: dict[tuple[str, int], list[int]] | None = None
        self._classes: Mapping[tuple[str, int], str] | NewestClasses | None = None

    # -- what the index alone answers

    @property
    def record_count(self) -> int:
        return self.reader.record_count

    @property
    def end_rel(self) -> int:
        """Length of the run in ns (its last record's time relative to the start)."""
        end = self._end_ns
        if self.model is not None:
            end = max(end, self.model.end_ns)
        return max(0, end - self.start_ns)

    @property
    def complete(self) -> bool:
        return self.reader.recovery.complete

    def record(self, seq: int) -> Record:
        return self.reader.record_at(seq)

    def seq_at(self, t_rel: int) -> int:
        """The first record at or after ``t_rel`` (the last record when none)."""
        seq = self.reader.seek_time(self.start_ns + t_rel).seq
        return self.record_count - 1 if seq is None else seq

    def t_rel_of(self, seq: int) -> int:
        return self.record(seq).time_ns - self.start_ns

    def refresh(self) -> int:
        """Pick up chunks a recorder appended; returns how many records arrived."""
        before = self.record_count
        if self.reader.refresh():
            span = self.reader.time_span
            if span:
                self._end_ns = span[1]
            self.generation += 1
        return self.record_count - before

    # -- the session model

    @property
    def loaded(self) -> bool:
        return self.model is not None

    def build_first(self, decoders: DecoderSet | None = None) -> tuple[Folded, bool] | None:
        """What the first screen draws (lanes, wedges) before the whole model, and whether it is the whole
        one, when the services can give it sooner (``Services.load_channels``; a worker thread)."""
        found = self.services.load_channels(self.path, decoders)
        return (self.fold(found[0]), found[1]) if found is not None else None

    def build_model(self, decoders: DecoderSet | None = None) -> Folded:
        """Fold the trace (its own reader, so this runs in a worker thread), with ``decoders`` if given."""
        return self.fold(self.services.load_model(self.path, decoders))

    def fold(self, model: SessionModel) -> Folded:
        """What the screen draws from ``model``: lanes, wedges, the call index (object trees: ``Folded.trees``)."""
        from rmtrace.columns.collector import young_collections  # imported by the fold or the load before this
        with young_collections():  # thousands of lanes and their labels, none garbage: no full collection
            return Folded(model, CallIndex.of_model(model), lane_rows(model, self.start_ns),
                          list(self.services.find_wedges(model)), self.start_ns)

    def attach(self, folded: Folded) -> None:
        """Use this folded model from now on (on the UI thread)."""
        self._folded = folded
        self.model = folded.model
        self._children = None
        self._classes = None
        self.generation += 1

    @property
    def folded(self) -> Folded | None:
        """What was last attached."""
        return self._folded

    def call_at(self, seq: int) -> CallInfo | None:
        return self._folded.calls.call_at(seq) if self._folded is not None else None

    def build_decoders(self) -> DecoderSet | None:
        """The trace's decoders (runs in a worker thread; the profile is chosen from the metadata, which the
        run's reader read when it opened and never changes: no second reader, whose open reads the whole
        chunk index again, 0.03 s at 1M records)."""
        make = self.services.decoders_for
        return None if make is None else make(self.reader.meta)

    def attach_decoders(self, decoders: DecoderSet) -> None:
        self.decoders = decoders
        self.generation += 1

    def status_namer(self) -> Callable[[int], str | None] | None:
        """NV_STATUS value -> its name, from the trace's driver profile (None before the decoders are built)."""
        decoders = self.model.decoders if self.model is not None else self.decoders
        return None if decoders is None else decoders.profile.status.get

    def decoded(self, rec: Record) -> Decoded | None:
        """A row's decode: name, status, handles (not every field)."""
        decoders = self.model.decoders if self.model is not None else self.decoders
        if decoders is None:
            return None
        return decoders.decode(rec, self.services.row_level)

    def decoded_call(self, seq: int) -> tuple[Decoded | None, tuple[Record, ...]]:
        """The whole call a record belongs to, decoded field by field (enter with exit), and its records."""
        call = self.call_at(seq)
        records: tuple[Record, ...] = (self.record(seq),)
        if call is not None and call.exit_seq is not None and call.exit_seq != call.enter_seq:
            records = (self.record(call.enter_seq), self.record(call.exit_seq))
        decoders = self.model.decoders if self.model is not None else self.decoders
        if decoders is None:
            return None, records
        item = records[0] if len(records) == 1 else Call(records, CallState.COMPLETE)
        return decoders.decode(item, self.services.full_level), records

    # -- rows

    def row(self, seq: int) -> EventRow:
        rec = self.record(seq)
        dec = self.decoded(rec)
        call = self.call_at(seq)
        client = (self.model.client_of(seq) or "") if self.model is not None else ""
        handles = frozenset(_handles_of(dec))
        return EventRow(
            seq=seq, t_rel=rec.time_ns - self.start_ns, pid=rec.pid, tid=rec.tid, client=client,
            source=enum_name(Source, rec.source), phase=enum_name(Phase, rec.phase).lower(),
            operation=f"{PHASE_MARKS.get(rec.phase, '?')} {self._operation(rec, dec)}",
            obj=self._object_text(client, handles),
            status=_status_text(rec, dec, call),
            latency_ns=_latency(call),
            error=_is_error(rec, dec, call),
            in_flight=bool(call is not None and call.in_flight),
            handles=handles,
        )

    @staticmethod
    def _operation(rec: Record, dec: Decoded | None) -> str:
        if dec is not None:
            return f"{dec.name} {dec.detail or ''}".strip()
        return f"op {rec.op:#x}"

    def _object_text(self, client: str, handles: frozenset[int]) -> str:
        if not handles:
            return ""
        classes = self._class_names()
        names = []
        for h in sorted(handles):
            name = classes.get((client, h))
            names.append(f"{name} {h:#x}" if name is not None else f"{h:#x}")
        return ", ".join(names)

    def _class_names(self) -> Mapping[tuple[str, int], str] | NewestClasses:
        """(client id, handle) -> the class name of the newest object of that handle (the model's ``objects``).
        A model loaded from the cache keeps its objects as columns, made into ``RmObject``\\ s only when first
        read: naming a row's handles through them made every one (~0.6 s at 1M records, on the first screen),
        so the names are looked up in the columns (``NewestClasses``)."""
        if self._classes is None:
            model = self.model
            if model is None:
                return {}
            from rmtrace.session.objects import ObjectList  # the model's module: imported with it
            if isinstance(model.object_list, ObjectList) and NewestClasses.fits(model.object_list.columns):
                self._classes = NewestClasses(model.object_list.columns)
            else:
                self._classes = {key: obj.class_name for key, obj in model.objects.items()}
        return self._classes

    # -- time

    def lanes(self) -> list[LaneRow]:
        return self._folded.lanes if self._folded is not None else []

    def group_labels(self) -> dict[str, str]:
        """Lane group -> a heading: a client's label, or the host's."""
        labels = {"host": "host (ranks)"}
        if self.model is not None:
            labels.update({c.id: c.label for c in self.model.clients})
        return labels

    def state_at(self, t_rel: int) -> State | None:
        return None if self.model is None else self.model.state_at(self.start_ns + t_rel)

    # -- objects and wedges

    def object_trees(self) -> dict[str, list[ObjectNode]]:
        return self._folded.trees() if self._folded is not None else {}

    @property
    def trees_ready(self) -> bool:
        """The object trees are built (``object_trees`` answers at once)."""
        return self._folded is not None and self._folded.trees_ready

    def entities_of(self, client_id: str, handle: int) -> set[str]:
        """Lane entities an object is about: a channel it is, or the channels and ranks below it."""
        if self.model is None:
            return set()
        under = self.object_handles(client_id, handle)
        ranks = {rank.index: rank.entity for rank in self.model.ranks.values()}
        found = set()
        for ch in self.model.channels.values():
            if ch.client_id == client_id and ch.handle in under:
                found.add(ch.entity)
                if ch.rank in ranks:
                    found.add(ranks[ch.rank])
        client = next((c for c in self.model.clients if c.id == client_id), None)
        if not found and client is not None and handle == client.h_client:
            found.add(client.entity)
        return found

    def object_handles(self, client_id: str, handle: int) -> frozenset[int]:
        """The handle and every handle below it (what the events filter matches)."""
        if self.model is None:
            return frozenset({handle})
        if self._children is None:
            self._children = {}
            for (cid, h), obj in self.model.objects.items():
                if obj.parent is not None and obj.parent != h:
                    self._children.setdefault((cid, obj.parent), []).append(h)
        under, todo = {handle}, [handle]
        while todo:
            for child in self._children.get((client_id, todo.pop()), ()):
                if child not in under:
                    under.add(child)
                    todo.append(child)
        return frozenset(under)

    def wedges(self) -> list[Wedge]:
        return self._folded.wedges if self._folded is not None else []

    def wedge_time(self, wedge: Wedge) -> int:
        """When a wedge shows, relative to the start: its own time, its record's, or the end."""
        if wedge.t_ns is not None:
            return wedge.t_ns - self.start_ns
        if wedge.seq is not None:
            return self.t_rel_of(wedge.seq)
        return self.end_rel

    def lane_for_wedge(self, wedge: Wedge) -> str | None:
        """The wedge's own lane, else its client's lane in the most severe state at the wedge's time."""
        if getattr(wedge, "entity", None) and any(lane.entity == wedge.entity for lane in self.lanes()):
            return wedge.entity
        t = self.wedge_time(wedge)
        best: tuple[int, str] | None = None
        for lane in self.lanes():
            if lane.group != wedge.client_id and lane.entity != wedge.client_id:
                continue
            for t0, t1, state, _ in lane.segments:
                if t0 <= t <= t1:
                    rank = (look(state).severity, lane.entity)
                    if best is None or rank[0] > best[0]:
                        best = rank
        return best[1] if best else None

    def client_seqs(self, client_id: str) -> Sequence[int]:
        return self.model.client_seqs(client_id) if self.model is not None else ()

    def channel_handles(self, wanted: Iterable[str]) -> frozenset[int]:
        """Channel ids (``c1/ch0``) or handles (``0xcaf000d4``) -> handles; an unknown id matches nothing."""
        out = set()
        for text in wanted:
            if "/" not in text:
                out.add(int(text, 0))
            elif self.model is not None and text in self.model.channels:
                out.add(self.model.channels[text].handle)
        return frozenset(out) or frozenset({-1})

    # -- scans (each through a private reader: they run in worker threads)

    def _private(self) -> RunView:
        private = RunView(TraceReader(self.path), self.services, label=self.label)
        private.start_ns = self.start_ns
        private.model, private._folded, private.decoders = self.model, self._folded, self.decoders
        return private

    def scan(self, flt: EventFilter, start: int = 0, end: int | None = None, *, batch: int = 2000,
             stop: Callable[[], bool] = lambda: False) -> Iterator[tuple[list[int], int]]:
        """Sequence numbers in ``[start, end)`` matching ``flt``, in batches, each with how many were looked at.

        A filter naming clients walks just their records (the model knows
        them); ``stop`` is polled between batches.
        """
        private = self._private()
        try:
            end = private.record_count if end is None else end
            by_client = start == 0 and bool(flt.clients) and self.model is not None
            seqs: Iterable[int] = range(start, end)
            if by_client:
                merged = heapq.merge(*(self.client_seqs(c) for c in sorted(flt.clients)))
                seqs = itertools.takewhile(lambda seq: seq < end, merged)
            channels = self.channel_handles(flt.channels) if flt.channels else frozenset()
            # rows are dear (decoding); a client's records come from the model, so only
            # operation, status, text, channel and object filters need them
            need_rows = flt.needs_rows or bool(flt.clients) and (self.model is None or not by_client)
            found: list[int] = []
            looked = 0
            for seq in seqs:
                looked += 1
                rec = private.record(seq)
                if flt.header_matches(rec.pid, rec.source) and (
                        not need_rows or flt.row_matches(private.row(seq), channels)):
                    found.append(seq)
                if looked % batch == 0:
                    yield found, looked
                    found = []
                    if stop():
                        return
            yield found, looked
        finally:
            private.close()

    def find_text(self, text: str, seqs: Iterable[int], *, stop: Callable[[], bool] = lambda: False,
                  check_every: int = 500) -> int | None:
        """Position in ``seqs`` of the first row whose text contains ``text`` (case-blind), or None."""
        private = self._private()
        needle = text.lower()
        try:
            for n, seq in enumerate(seqs):
                if needle in private.row(seq).text.lower():
                    return n
                if n % check_every == 0 and stop():
                    return None
            return None
        finally:
            private.close()

    def close(self) -> None:
        self.reader.close()


def _handles_of(dec: Decoded | None) -> Iterable[int]:
    if dec is None:
        return ()
    return (h for h in dec.handles.values() if isinstance(h, int) and h)


def _latency(call: CallInfo | None) -> int | None:
    """Enter to exit of a call; None for a lone record (an event, a message) or a call still in flight."""
    if call is None or call.t_exit is None or call.exit_seq == call.enter_seq:
        return None
    return call.t_exit - call.t_enter


def _status_text(rec: Record, dec: Decoded | None, call: CallInfo | None) -> str:
    if call is not None and call.in_flight:
        return "in flight"
    if dec is not None and dec.errno:
        return f"errno {dec.errno}"
    if dec is not None and dec.status_name:
        if dec.status is not None and dec.status_name == str(dec.status):  # a plain return value: an address in hex
            return format_arg("status", dec.status, {})
        return dec.status_name
    if call is not None and call.status_name:
        return str(call.status_name)
    if rec.phase == Phase.EXIT:
        return f"ret {rec.ret}" + (f" errno {rec.err}" if rec.err else "")
    return ""


def _is_error(rec: Record, dec: Decoded | None, call: CallInfo | None) -> bool:
    if dec is not None and dec.ok is not None:
        return not dec.ok
    if dec is not None and dec.status is not None:
        return dec.status != 0
    if call is not None and isinstance(call.status, int):
        return call.status != 0
    return rec.phase == Phase.EXIT and (rec.err != 0 or rec.ret < 0)

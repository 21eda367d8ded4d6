"""Perfetto: a trace ui.perfetto.dev opens, written with Perfetto's own protos and streaming builder.

Tracks (TrackDescriptor), in the UI's tree:

* one process track per traced process, one thread track under it per
  thread: each call (an ioctl's enter to its exit, a system call) is a slice
  named as ``rmtrace show`` names it (``RM_ALLOC(HOPPER_CHANNEL_GPFIFO_A)``),
  its status, client and sequence number as arguments; a call still in
  flight when the trace ends is a slice that runs to the end, in category
  ``in_flight``; the GSP RPCs and sema messages a thread sent are instants
  inside the call they served;
* under its client's process, one track per channel: its state over time
  (allocated, bound, scheduled, registered, published, waiting, completed,
  stale, freed), from the session fold's transitions;
* under ``host service``: one track per CE rank (latch armed / fired, drain
  held), ``GSP channel N`` (responses and events), ``sema service`` (what the
  host sent: releases, faked completions, latches, drains, counters) and a
  counter track per host counter (pub_calls, gr_rel, faked, drain_held, ...).

Flows: from a GSP request to its response, and from a call to the sema
completion (``SEMA_RELEASE``, ``SEMA_FAKED_COMPLETION``) that the host sent
its thread while it was inside the call.

The calls are the rows of the trace's call table and the states the columnar
fold's transitions, a block of rows at a time (``rmtrace.export.fold``);
only the few calls whose track needs more than the table's columns (GSP
exchanges, sema messages, an exec's command line, an exit whose enter the
trace does not hold) have their records read.

Timestamps are the trace's CLOCK_MONOTONIC nanoseconds, given as the trace
clock; a clock snapshot maps them to wall-clock time.  Packets are made in a
``Trace`` message of at most ``BATCH`` packets and written when it is full:
a ``Trace`` is its packets one after another, so the file is the bytes a
packet at a time would give (``StreamingTraceProtoBuilder``), at one
serialization per batch.  What else waits is one call per thread (its flows
are known once the thread's next call starts), the transitions not yet
final and the current state of each channel and
rank: a channel's last state runs to the end of the trace, and it is written
once the fold has forgotten its client and none of its transitions is pending,
so what is held is what is live.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, NamedTuple, Protocol

import numpy as np
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from rmtrace.calls import Call, CallState
from rmtrace.columns.store import FAULT_AROUND_ROWS
from rmtrace.columns.table import STATES, CallTable
from rmtrace.export.fold import BLOCK_ROWS, TableStream, TransitionStream, tracked
from rmtrace.export.source import ExportInput
from rmtrace.record import Phase, Source, SysOp, enum_name
from rmtrace.session import Transition
from rmtrace.session.entities import Channel
from rmtrace.session.timeline import COUNTERS_ENTITY

SEQUENCE_ID = 1
BATCH = 4096
"""Packets serialized and written together (a few hundred KiB)."""
SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = (pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_SLICE_END,
                                            pb.TrackEvent.TYPE_INSTANT, pb.TrackEvent.TYPE_COUNTER)
RELEASES = frozenset({"SEMA_RELEASE", "SEMA_FAKED_COMPLETION"})
"""Host messages that complete a guest's work: the flow from the call they released ends on them."""
READ_SOURCES = frozenset({Source.GSP, Source.SEMA})
"""Calls whose records are read: a GSP exchange's parts and channel, which way a sema message went (the
table has neither in its columns)."""


class CallRow(NamedTuple):
    """What the writer needs of a call: the table's columns, and for a few calls their records (``call``)."""

    source: int
    op: int
    state: CallState
    pid: int
    tid: int
    t_enter: int
    t_last: int
    """The time of its last record."""
    enter_seq: int
    name: str
    full_name: str
    status_name: str | None
    client_id: str | None
    call: Call | None
    """Its records, for a GSP exchange, a sema message, an exec and an exit with no enter (RESUMED)."""


class States(Protocol):
    """Where the writer's state tracks and names come from (``rmtrace.export.fold.TableStream``)."""

    retired: list[str]
    transitions: TransitionStream

    def argv(self, pid: int) -> Sequence[str]: ...

    def channel(self, entity: str) -> Channel | None:
        """The channel of entity ``chan/ID`` while kept, with the engine its allocation gave it (its track's name)."""

    def client_pid(self, client_id: str) -> int | None: ...


_CATEGORIES: dict[int, str] = {}


def _category(source: int) -> str:
    """An event's category: its source's name in lower case (looked up once per source)."""
    name = _CATEGORIES.get(source)
    if name is None:
        name = _CATEGORIES[source] = enum_name(Source, source).lower()
    return name


@dataclass(slots=True)
class _Pending:
    """A thread's last call, held until its flows are known (the thread's next call, or the end)."""

    row: CallRow
    t_end: int
    category: str
    flows: list[int] = field(default_factory=list)


@dataclass(slots=True)
class _Segment:
    """An entity's current state: a slice from ``t0`` that ends at its next change."""

    t0: int
    state: str
    detail: str = ""


class PerfettoWriter:
    """Turns calls and transitions into packets, tracks made as they are first needed."""

    def __init__(self, out: BinaryIO, src: ExportInput, states: States) -> None:
        self.out = out
        self._batch = pb.Trace()
        self.src = src
        self.states = states
        self.packets = 0
        self._uuid = 0
        self._in_batch = 0
        self._flow = 0
        self._processes: dict[int, int] = {}
        self._threads: dict[tuple[int, int], int] = {}
        self._pending: dict[tuple[int, int], _Pending] = {}
        self._tracks: dict[str, int] = {}   # named tracks: channels, ranks, GSP channels, host tracks, counters
        self._segments: dict[str, _Segment] = {}
        self.host = self._track_descriptor("host service")

    # -- packets -------------------------------------------------------------------------------

    def _next_uuid(self) -> int:
        self._uuid += 1
        return self._uuid

    def _packet(self) -> pb.TracePacket:
        """A new packet, in the batch (it is written with it)."""
        if self._in_batch >= BATCH:
            self.flush()
        packet = self._batch.packet.add()
        packet.trusted_packet_sequence_id = SEQUENCE_ID
        self._in_batch += 1
        self.packets += 1
        return packet

    def flush(self) -> None:
        """Write the packets made so far."""
        if self._in_batch:
            self.out.write(self._batch.SerializeToString())
            self._batch = pb.Trace()  # a new message, not Clear(): upb keeps a cleared message's arena
            self._in_batch = 0

    def _track_descriptor(self, name: str, parent: int | None = None, counter: bool = False) -> int:
        uuid = self._next_uuid()
        packet = self._packet()
        desc = packet.track_descriptor
        desc.uuid = uuid
        desc.name = name
        if parent is not None:
            desc.parent_uuid = parent
        if counter:
            desc.counter.SetInParent()
        return uuid

    def event(self, t: int, track: int, kind: int, name: str | None = None, category: str | None = None,
              args: Iterable[tuple[str, Any]] = (), flows: Sequence[int] = (), ends: Sequence[int] = (),
              value: int | None = None) -> None:
        packet = self._packet()
        packet.timestamp = t
        ev = packet.track_event
        ev.type = kind
        ev.track_uuid = track
        if name is not None:
            ev.name = name
        if category is not None:
            ev.categories.append(category)
        for key, v in args:
            if isinstance(v, int):
                ev.debug_annotations.add(name=key, int_value=v)
            else:
                ev.debug_annotations.add(name=key, string_value=str(v))
        if flows:
            ev.flow_ids.extend(flows)
        if ends:
            ev.terminating_flow_ids.extend(ends)
        if value is not None:
            ev.counter_value = value

    def clock_snapshot(self) -> None:
        """The trace clock at the trace's start, and the wall clock at the same instant."""
        offset = self.src.wall_offset_ns
        if offset is None:
            return
        packet = self._packet()
        packet.timestamp = self.src.start_ns
        for clock, value in ((pb.BUILTIN_CLOCK_BOOTTIME, self.src.start_ns),
                             (pb.BUILTIN_CLOCK_REALTIME, self.src.start_ns + offset)):
            c = packet.clock_snapshot.clocks.add()
            c.clock_id = clock
            c.timestamp = value

    # -- tracks ----------------------------------------------------------------------------------

    def process_track(self, pid: int) -> int:
        uuid = self._processes.get(pid)
        if uuid is None:
            uuid = self._processes[pid] = self._next_uuid()
            self._describe_process(pid, uuid)
        return uuid

    def _describe_process(self, pid: int, uuid: int) -> None:
        packet = self._packet()
        desc = packet.track_descriptor
        desc.uuid = uuid
        desc.process.pid = pid
        argv = self.states.argv(pid)
        if argv:
            desc.process.process_name = os.path.basename(argv[0])
            desc.process.cmdline.extend(argv)

    def thread_track(self, pid: int, tid: int) -> int:
        key = (pid, tid)
        uuid = self._threads.get(key)
        if uuid is None:
            parent = self.process_track(pid)
            uuid = self._threads[key] = self._next_uuid()
            packet = self._packet()
            desc = packet.track_descriptor
            desc.uuid = uuid
            desc.parent_uuid = parent
            desc.thread.pid = pid
            desc.thread.tid = tid
        return uuid

    def named_track(self, key: str, name: str, parent: int, counter: bool = False) -> int:
        uuid = self._tracks.get(key)
        if uuid is None:
            uuid = self._tracks[key] = self._track_descriptor(name, parent, counter)
        return uuid

    def entity_track(self, entity: str) -> int:
        if entity.startswith("chan/") and entity not in self._tracks:
            chan = self.states.channel(entity)
            if chan is not None:
                pid = self.states.client_pid(chan.client_id)
                parent = self.process_track(pid) if pid is not None else self.host
                name = " ".join(x for x in (f"channel {chan.id}", f"{chan.handle:#x}", chan.class_name, chan.engine)
                                if x)
                return self.named_track(entity, name, parent)
        return self.named_track(entity, entity.replace("/", " "), self.host)

    # -- calls -----------------------------------------------------------------------------------

    def call(self, row: CallRow) -> None:
        if row.source == Source.GSP:
            self._gsp(row)
        elif row.state is CallState.SINGLE:
            self._message(row)
        elif row.state is CallState.RESUMED:
            assert row.call is not None
            if row.call.first.phase in (Phase.EXIT, Phase.RECV):  # the close of a call yielded UNFINISHED, or an exit alone
                self.event(row.t_enter, self.thread_track(row.pid, row.tid), SLICE_END)
        else:
            self._slice(row)
        if row.source == Source.SYS and row.op == SysOp.EXEC:
            self._describe_process(row.pid, self.process_track(row.pid))
        elif row.source == Source.SYS and row.op == SysOp.EXIT:
            self._forget(row.pid)

    def _slice(self, row: CallRow) -> None:
        key = (row.pid, row.tid)
        self._flush_thread(key)
        if row.state is CallState.UNFINISHED:
            self._begin(key, row, "unfinished", [])  # its RESUMED close ends it
            return
        in_flight = row.state is CallState.IN_FLIGHT
        t_end = self.src.end_ns if in_flight else row.t_last
        self._pending[key] = _Pending(row, max(t_end, row.t_enter), "in_flight" if in_flight else
                                      _category(row.source))

    def _begin(self, key: tuple[int, int], row: CallRow, category: str, flows: list[int],
               track: int | None = None) -> None:
        args: list[tuple[str, Any]] = [("seq", row.enter_seq)]
        if row.status_name is not None:
            args.append(("status", row.status_name))
        if row.client_id is not None:
            args.append(("client", row.client_id))
        if category == "in_flight":
            args.append(("in_flight", "still in flight at the end of the trace"))
        self.event(row.t_enter, track if track is not None else self.thread_track(*key), SLICE_BEGIN,
                   row.full_name, category, args, flows)

    def _flush_thread(self, key: tuple[int, int]) -> None:
        pending = self._pending.pop(key, None)
        if pending is not None:
            track = self.thread_track(*key)
            self._begin(key, pending.row, pending.category, pending.flows, track)
            self.event(pending.t_end, track, SLICE_END)

    def _forget(self, pid: int) -> None:
        """A process exited: write its last calls and drop its tracks from the maps (they stay in the file)."""
        for key in [k for k in self._threads if k[0] == pid]:
            self._flush_thread(key)
            del self._threads[key]
        self._processes.pop(pid, None)

    def _message(self, row: CallRow) -> None:
        outbound = row.source != Source.SEMA or (row.call is not None and row.call.first.phase == Phase.SEND)
        if not outbound or not row.pid:  # what the host sent
            track = self.named_track(f"source/{row.source}", f"{enum_name(Source, row.source).lower()} service"
                                     if row.source == Source.SEMA else enum_name(Source, row.source).lower(), self.host)
        else:
            track = self.thread_track(row.pid, row.tid)
        ends: list[int] = []
        if row.name in RELEASES and row.pid:
            pending = self._pending.get((row.pid, row.tid))
            if pending is not None and pending.row.t_enter <= row.t_enter <= pending.t_end:
                self._flow += 1
                pending.flows.append(self._flow)
                ends.append(self._flow)
        args = [("status", row.status_name)] if row.status_name is not None else []
        self.event(row.t_enter, track, INSTANT, row.full_name, _category(row.source), args, ends=ends)

    def _gsp(self, row: CallRow) -> None:
        assert row.call is not None
        call = row.call
        request = call.first
        gsp_track = self.named_track(f"gsp/{request.fd}", f"GSP channel {max(request.fd, 0)}", self.host)
        sender = self.thread_track(request.pid, request.tid) if request.pid else gsp_track
        if len(call.records) == 1:  # an event, or a request never answered
            self.event(request.time_ns, gsp_track if request.phase == Phase.RECV else sender, INSTANT, row.full_name,
                       "gsp", [("state", call.state.value)])
            return
        self._flow += 1
        self.event(request.time_ns, sender, INSTANT, row.full_name, "gsp", [("seq", request.seq)], flows=[self._flow])
        args = [("status", row.status_name)] if row.status_name is not None else []
        self.event(call.last.time_ns, gsp_track, INSTANT, f"{row.full_name} response", "gsp", args, ends=[self._flow])

    # -- state tracks and counters ---------------------------------------------------------------

    def transition(self, tr: Transition) -> None:
        if not tracked(tr.entity):
            return
        if tr.entity == COUNTERS_ENTITY:
            if isinstance(tr.value, int):
                track = self.named_track(f"counter/{tr.attr}", tr.attr, self.host, counter=True)
                self.event(tr.t_ns, track, COUNTER, value=tr.value)
            return
        if tr.attr == "engine":  # what the channel's track is named with (``States.channel``), not a state
            return
        current = self._segments.get(tr.entity)
        if tr.attr == "detail":
            if current is not None:
                current.detail = str(tr.value)
            return
        if tr.attr != "state" or (current is not None and current.state == tr.value):
            return
        if current is not None:
            self._close(tr.entity, current, tr.t_ns)
        else:
            self.entity_track(tr.entity)  # named now, while the fold still has the channel
        self._segments[tr.entity] = _Segment(tr.t_ns, str(tr.value))

    def _close(self, entity: str, seg: _Segment, t: int) -> None:
        if t <= seg.t0:
            return  # several changes at one instant: only the last shows (as the session's lanes do)
        track = self.entity_track(entity)
        self.event(seg.t0, track, SLICE_BEGIN, f"{seg.state}: {seg.detail}" if seg.detail else seg.state, "state")
        self.event(t, track, SLICE_END)

    def retire(self) -> None:
        """Write out the last state of the channels the fold has forgotten, once no transition of theirs is
        pending: a state nothing changes any more runs to the end of the trace, as at ``finish``."""
        retired = self.states.retired
        if not retired:
            return
        pending = self.states.transitions.pending
        end = self.src.end_ns
        waiting = []
        for entity in retired:
            if entity in pending:
                waiting.append(entity)
                continue
            seg = self._segments.pop(entity, None)
            if seg is not None:
                self._close(entity, seg, max(end, seg.t0 + 1))
            self._tracks.pop(entity, None)
        retired[:] = waiting

    def finish(self) -> None:
        for key in list(self._pending):
            self._flush_thread(key)
        end = self.src.end_ns
        for entity, seg in self._segments.items():
            self._close(entity, seg, max(end, seg.t0 + 1))
        self._segments.clear()


_COLUMNS = ("source", "op", "state", "pid", "tid", "t_enter", "t_exit", "enter_seq", "exit_seq", "name", "detail",
            "status_name", "client")
"""The table's columns a block of rows reads."""


def call_rows(src: ExportInput, table: CallTable, start: int, stop: int) -> list[CallRow]:
    """Rows [start, stop) of the table as the writer takes them (the records read of the few that need them)."""
    c = {name: table.columns[name][start:stop].tolist() for name in _COLUMNS}
    names, details, statuses = table.names.values, table.details.values, table.status_names.values
    clients = table.client_ids()  # not a ClientRow made of each of the trace's clients for every block
    members = {row: parts for row, parts in table.members.items() if start <= row < stop}
    states = [STATES[s] for s in c["state"]]
    read = [i for i, (source, op, state) in enumerate(zip(c["source"], c["op"], states))
            if source in READ_SOURCES or state is CallState.RESUMED or (source == Source.SYS and op == SysOp.EXEC)]
    wanted = sorted(seq for i in read for seq, _t in table.records_of(start + i))  # in the trace's order
    records = {seq: src.reader.record_at(seq) for seq in wanted}
    calls = {i: Call(tuple(records[seq] for seq, _t in table.records_of(start + i)), states[i]) for i in read}
    out = []
    for i, (source, op, pid, tid, t_enter, t_exit, enter_seq, exit_seq, name, detail, status, client) in enumerate(zip(
            c["source"], c["op"], c["pid"], c["tid"], c["t_enter"], c["t_exit"], c["enter_seq"], c["exit_seq"],
            c["name"], c["detail"], c["status_name"], c["client"])):
        parts = members.get(start + i)
        t_last = parts[-1][1] if parts is not None else t_exit if exit_seq >= 0 else t_enter
        text, detail_text = names[name], details[detail] if detail >= 0 else None
        out.append(CallRow(source, op, states[i], pid, tid, t_enter, t_last, enter_seq, text,
                           f"{text}({detail_text})" if detail_text else text,
                           statuses[status] if status >= 0 else None, clients[client] if client >= 0 else None,
                           calls.get(i)))
    return out


def _records_in(table: CallTable, start: int, stop: int) -> int:
    """How many records rows [start, stop) are made of."""
    enter = np.asarray(table.columns["enter_seq"][start:stop]).astype(np.int64)
    exit_ = np.asarray(table.columns["exit_seq"][start:stop])
    n = len(enter) + int(np.count_nonzero((exit_ >= 0) & (exit_ != enter)))
    for row, parts in table.members.items():  # a call in several parts: its parts, not its first and last
        if start <= row < stop:
            k = row - start
            n += len(parts) - 1 - int(exit_[k] >= 0 and exit_[k] != enter[k])
    return n


def written_rows(src: ExportInput, stream: TableStream, writer: PerfettoWriter) -> Iterator[CallRow]:
    """Write each call of ``src`` in turn with the transitions final before it, yielding its row once it is
    written (a caller may look at the fold and the writer between calls, as a test of their bounded state does)."""
    table = stream.table
    for start, stop in stream.blocks():
        for i, row in enumerate(call_rows(src, table, start, stop), start):
            for tr in stream.before(i, row.t_enter):
                writer.transition(tr)
            writer.retire()
            if row.call is not None and row.source == Source.SYS and row.op == SysOp.EXEC:
                stream.executed(row.pid, row.call)
            writer.call(row)
            stream.after(row.source, row.op, row.pid, row.enter_seq, row.t_enter, row.t_last)
            yield row
        src.progress.add(_records_in(table, start, stop))
        table.release(max(start - FAULT_AROUND_ROWS, 0), stop)


def write_perfetto(src: ExportInput, out: str, block_rows: int = BLOCK_ROWS) -> int:
    """Write the trace as a Perfetto trace to ``out`` (a path); returns the packets written.  ``block_rows``:
    the rows folded ahead of the writer (the file does not depend on it)."""
    stream = TableStream(src.reader, src.decoders, block_rows)
    with open(out, "wb") as f:
        writer = PerfettoWriter(f, src, stream)
        writer.clock_snapshot()
        for _ in written_rows(src, stream, writer):
            pass
        for tr in stream.finish():
            writer.transition(tr)
        writer.finish()
        writer.flush()
    return writer.packets

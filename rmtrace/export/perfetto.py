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

Timestamps are the trace's CLOCK_MONOTONIC nanoseconds, given as the trace
clock; a clock snapshot maps them to wall-clock time.  Packets are made in a
``Trace`` message of at most ``BATCH`` packets and written when it is full:
a ``Trace`` is its packets one after another, so the file is the bytes a
packet at a time would give (``StreamingTraceProtoBuilder``), at one
serialization per batch.  What else waits is one call per thread (its flows
are known once the thread's next call starts), the transitions not yet
final (``rmtrace.export.fold``) and the current state of each channel and
rank: a channel's last state runs to the end of the trace, and it is written
once the fold has forgotten its client and none of its transitions is pending,
so what is held is what is live.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from rmtrace.calls import Call, CallState
from rmtrace.export.fold import StreamingFold
from rmtrace.export.source import ExportInput
from rmtrace.record import Phase, Source, SysOp, enum_name
from rmtrace.session import CallInfo, Transition

SEQUENCE_ID = 1
BATCH = 4096
"""Packets serialized and written together (a few hundred KiB)."""
SLICE_BEGIN, SLICE_END, INSTANT, COUNTER = (pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_SLICE_END,
                                            pb.TrackEvent.TYPE_INSTANT, pb.TrackEvent.TYPE_COUNTER)
RELEASES = frozenset({"SEMA_RELEASE", "SEMA_FAKED_COMPLETION"})
"""Host messages that complete a guest's work: the flow from the call they released ends on them."""
STATE_ENTITIES = ("chan/", "rank/")
"""Entities of the fold whose ``state`` is a track (clients are their threads' calls)."""
HOST_COUNTERS = "host"


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

    info: CallInfo
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

    def __init__(self, out: BinaryIO, src: ExportInput, fold: StreamingFold) -> None:
        self.out = out
        self._batch = pb.Trace()
        self.src = src
        self.fold = fold
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
        proc = self.fold.folder.processes.get(pid)
        if proc is not None and proc.argv:
            desc.process.process_name = os.path.basename(proc.argv[0])
            desc.process.cmdline.extend(proc.argv)

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
        if entity.startswith("chan/"):
            chan = self.fold.folder.channels.get(entity.removeprefix("chan/"))
            if chan is not None:
                client = self.fold.folder.clients.get(chan.client_id)
                parent = self.process_track(client.pid) if client is not None else self.host
                name = " ".join(x for x in (f"channel {chan.id}", f"{chan.handle:#x}", chan.class_name, chan.engine) if x)
                return self.named_track(entity, name, parent)
        return self.named_track(entity, entity.replace("/", " "), self.host)

    # -- calls -----------------------------------------------------------------------------------

    def call(self, call: Call, info: CallInfo) -> None:
        first = call.first
        if first.source == Source.GSP:
            self._gsp(call, info)
        elif call.state is CallState.SINGLE:
            self._message(call, info)
        elif call.state is CallState.RESUMED:
            if first.phase in (Phase.EXIT, Phase.RECV):  # the close of a call yielded UNFINISHED
                self.event(first.time_ns, self.thread_track(first.pid, first.tid), SLICE_END)
        else:
            self._slice(call, info)
        if first.source == Source.SYS and first.op == SysOp.EXEC:
            self._describe_process(first.pid, self.process_track(first.pid))
        elif first.source == Source.SYS and first.op == SysOp.EXIT:
            self._forget(first.pid)

    def _slice(self, call: Call, info: CallInfo) -> None:
        first = call.first
        key = (first.pid, first.tid)
        self._flush_thread(key)
        if call.state is CallState.UNFINISHED:
            self._begin(key, info, "unfinished", [])  # its RESUMED close ends it
            return
        in_flight = call.state is CallState.IN_FLIGHT
        t_end = self.src.end_ns if in_flight else call.last.time_ns
        self._pending[key] = _Pending(info, max(t_end, first.time_ns), "in_flight" if in_flight else
                                      _category(first.source))

    def _begin(self, key: tuple[int, int], info: CallInfo, category: str, flows: list[int],
               track: int | None = None) -> None:
        args: list[tuple[str, Any]] = [("seq", info.enter_seq)]
        if info.status_name is not None:
            args.append(("status", info.status_name))
        if info.client_id is not None:
            args.append(("client", info.client_id))
        if category == "in_flight":
            args.append(("in_flight", "still in flight at the end of the trace"))
        self.event(info.t_enter, track if track is not None else self.thread_track(*key), SLICE_BEGIN,
                   info.full_name, category, args, flows)

    def _flush_thread(self, key: tuple[int, int]) -> None:
        pending = self._pending.pop(key, None)
        if pending is not None:
            track = self.thread_track(*key)
            self._begin(key, pending.info, pending.category, pending.flows, track)
            self.event(pending.t_end, track, SLICE_END)

    def _forget(self, pid: int) -> None:
        """A process exited: write its last calls and drop its tracks from the maps (they stay in the file)."""
        for key in [k for k in self._threads if k[0] == pid]:
            self._flush_thread(key)
            del self._threads[key]
        self._processes.pop(pid, None)

    def _message(self, call: Call, info: CallInfo) -> None:
        rec = call.first
        if (rec.source == Source.SEMA and rec.phase != Phase.SEND) or not rec.pid:  # what the host sent
            track = self.named_track(f"source/{rec.source}", f"{enum_name(Source, rec.source).lower()} service"
                                     if rec.source == Source.SEMA else enum_name(Source, rec.source).lower(), self.host)
        else:
            track = self.thread_track(rec.pid, rec.tid)
        ends: list[int] = []
        if info.name in RELEASES and rec.pid:
            pending = self._pending.get((rec.pid, rec.tid))
            if pending is not None and pending.info.t_enter <= rec.time_ns <= pending.t_end:
                self._flow += 1
                pending.flows.append(self._flow)
                ends.append(self._flow)
        args = [("status", info.status_name)] if info.status_name is not None else []
        self.event(rec.time_ns, track, INSTANT, info.full_name, _category(rec.source), args, ends=ends)

    def _gsp(self, call: Call, info: CallInfo) -> None:
        request = call.first
        gsp_track = self.named_track(f"gsp/{request.fd}", f"GSP channel {max(request.fd, 0)}", self.host)
        sender = self.thread_track(request.pid, request.tid) if request.pid else gsp_track
        if len(call.records) == 1:  # an event, or a request never answered
            self.event(request.time_ns, gsp_track if request.phase == Phase.RECV else sender, INSTANT, info.full_name,
                       "gsp", [("state", call.state.value)])
            return
        self._flow += 1
        self.event(request.time_ns, sender, INSTANT, info.full_name, "gsp", [("seq", request.seq)], flows=[self._flow])
        args = [("status", info.status_name)] if info.status_name is not None else []
        self.event(call.last.time_ns, gsp_track, INSTANT, f"{info.full_name} response", "gsp", args, ends=[self._flow])

    # -- state tracks and counters ---------------------------------------------------------------

    def transition(self, tr: Transition) -> None:
        if tr.entity == HOST_COUNTERS:
            if isinstance(tr.value, int):
                track = self.named_track(f"counter/{tr.attr}", tr.attr, self.host, counter=True)
                self.event(tr.t_ns, track, COUNTER, value=tr.value)
            return
        if not tr.entity.startswith(STATE_ENTITIES):
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
        retired = self.fold.retired
        if not retired:
            return
        pending = self.fold.transitions.pending
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


def written_calls(src: ExportInput, fold: StreamingFold, writer: PerfettoWriter) -> Iterator[CallInfo]:
    """Fold and write each call of ``src`` in turn, yielding its CallInfo once it is written (a caller
    may look at the fold and the writer between calls, as a test of their bounded state does)."""
    for call in src.calls():
        info = fold.fold(call)
        for tr in fold.transitions.final(call.first.time_ns):
            writer.transition(tr)
        writer.retire()
        writer.call(call, info)
        yield info


def write_perfetto(src: ExportInput, out: str) -> int:
    """Write the trace as a Perfetto trace to ``out`` (a path); returns the packets written."""
    fold = StreamingFold(src.decoders)
    with open(out, "wb") as f:
        writer = PerfettoWriter(f, src, fold)
        writer.clock_snapshot()
        for _ in written_calls(src, fold, writer):
            pass
        for tr in fold.transitions.final():
            writer.transition(tr)
        writer.finish()
        writer.flush()
    return writer.packets

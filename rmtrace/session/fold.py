"""Fold calls, in trace order, into the session's state.

Pure: no I/O, no UI.  ``Folder.fold(call)`` takes one call from the decoders' pairing (an
enter with its exit, a GSP request with its response, or a single message), asks the
semantic layer (``rmtrace.semantics``) what it means, and applies each event that took
effect through one handler per event type (``EFFECTS``).  The fold never looks at a call's
name: every fact it keeps comes from an event.  A call with no events is still counted as a
call of its client.

Transitions carry the time of the call's exit (of its enter for a call still in flight).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from rmtrace.calls import Call, CallState
from rmtrace.decoders import Decoded, DecoderSet
from rmtrace.decoders.profiles import DriverProfile
from rmtrace.record import Record, Source
from rmtrace.semantics import CallMeaning, Category, Interpreter
from rmtrace.semantics import events as ev
from rmtrace.session.entities import (
    CallInfo,
    Channel,
    Client,
    FreedBy,
    GspExchange,
    LaneState,
    Process,
    Rank,
    RmObject,
    stable_name,
)
from rmtrace.session.timeline import COUNTERS_ENTITY, Timeline

CHANNEL_PRECEDENCE = (LaneState.FREED, LaneState.STALE, LaneState.WAITING, LaneState.COMPLETED,
                      LaneState.PUBLISHED, LaneState.REGISTERED, LaneState.SCHEDULED, LaneState.BOUND,
                      LaneState.ALLOCATED)
"""A channel's lane shows the first of its flags in this order."""
RANK_PRECEDENCE = (LaneState.DRAIN_HELD, LaneState.LATCH_FIRED, LaneState.LATCH_ARMED)
COMPLETION_COUNTERS: Mapping[ev.Completion, str] = {ev.Completion.RELEASE: "gr_rel", ev.Completion.FAKED: "faked"}
"""The host counter each kind of completion reports."""
FREED_KEPT = 8
"""Freed channels kept per bare handle for late host messages (not every one ever seen)."""


class ClientNames:
    """What clients are called: the trace's own name for a pid it lists (a replay's plan), else the
    next free ``cN`` in order of appearance."""

    def __init__(self, named: Mapping[int, str] | None = None) -> None:
        self.named = dict(named or {})
        self.given: set[str] = set()

    def next(self, pid: int) -> str:
        name = self.named.get(pid) if pid else None
        if name is None or name in self.given:
            taken = self.given | set(self.named.values())
            n = len(self.given) + 1
            while f"c{n}" in taken:
                n += 1
            name = f"c{n}"
        self.given.add(name)
        return name


class Folder:
    """The session's state while the trace is folded."""

    def __init__(self, decoders: DecoderSet, timeline: Timeline, client_ids: Mapping[int, str] | None = None) -> None:
        """``client_ids``: pid -> client id for the clients the trace was made for (a replay's plan),
        so they keep their names; any other client is numbered by its first appearance."""
        self.decoders = decoders
        self.interpreter = Interpreter(decoders)
        self.profile: DriverProfile = decoders.profile
        self.tl = timeline
        self._engines: dict[int | None, tuple[str | None, int | None]] = {}
        self.client_names = ClientNames(client_ids)
        self.processes: dict[int, Process] = {}
        self.clients: dict[str, Client] = {}
        self._client_by_key: dict[Any, Client] = {}
        self.objects: dict[tuple[str, int], RmObject] = {}  # the newest object of each handle
        self.object_list: list[RmObject] = []  # every object, in allocation order (handles get reused)
        self._by_handle: dict[tuple[int, int], RmObject] = {}  # (hClient, handle): RM handles are per RM client
        self._children: dict[tuple[int, int], list[int]] = {}
        self._siblings: Counter = Counter()
        self.channels: dict[str, Channel] = {}
        self._channel_by_handle: dict[tuple[int, int], Channel] = {}
        self._channels_by_bare_handle: dict[int, list[Channel]] = {}  # host messages name a channel alone
        self._channel_flags: dict[str, set[LaneState]] = {}
        self._channel_counts: Counter = Counter()
        self._tsg_channels: dict[tuple[int, int], list[Channel]] = {}
        self._tsg_engine: dict[tuple[int, int], int] = {}  # a TSG's engine type: its channels run there
        self.ranks: dict[str, Rank] = {}
        self._rank_flags: dict[str, set[LaneState]] = {}
        self.calls: list[CallInfo] = []
        self.gsp: list[GspExchange] = []
        self.gsp_session = 0
        self.seq_client: list[tuple[int, str]] = []  # (seq, client id) for every record of a client
        self.stray_frees: list[CallInfo] = []
        self._counters: dict[str, int] = {}
        self.stop_reason: dict | None = None
        self.lost: list[dict] = []
        self.marked_in_flight: set[tuple[int, int]] = set()
        """(pid, call_id) of the calls the recorder itself saw in flight when it stopped."""

    # -- entry ---------------------------------------------------------------------------

    def fold(self, call: Call) -> None:
        meaning = self.interpreter.interpret(call)
        first = call.first
        self._touch_process(call)
        if meaning.first(ev.GspSessionStarted) is not None:
            self.gsp_session += 1  # the boot handshake opens the session it starts
        client = self._client_for(first, meaning)
        info = self._call_info(call, meaning, client)
        if client is not None:
            for rec in call.records:
                self.seq_client.append((rec.seq, client.id))
            client.last_ns = max(client.last_ns, call.last.time_ns)
            client.last_seq = max(client.last_seq, call.last.seq)
        self.calls.append(info)
        for event in meaning.effective():
            effect = EFFECTS.get(type(event))
            if effect is not None:
                effect(self, event, meaning, info)

    # -- clients and processes ---------------------------------------------------------

    def _touch_process(self, call: Call) -> None:
        for rec in call.records:
            proc = self.processes.get(rec.pid)
            if proc is None:
                proc = self.processes[rec.pid] = Process(rec.pid, first_ns=rec.time_ns)
            proc.last_ns = max(proc.last_ns, rec.time_ns)
            proc.threads.add(rec.tid)

    def _client_for(self, rec: Record, meaning: CallMeaning) -> Client | None:
        """The client a GPU record belongs to: its process, or its GSP session when no process is known."""
        if rec.source in (Source.SYS, Source.MARK):
            client = self._client_by_key.get(rec.pid)
            opened = meaning.first(ev.FdOpened)
            if client is not None or opened is None or not opened.device.nvidia:
                return client  # a process becomes a client when it opens an NVIDIA device
            key: Any = rec.pid
        elif rec.pid:
            key = rec.pid
        elif rec.source == Source.GSP:
            key = ("gsp", self.gsp_session)
        else:
            return None  # host-internal sema events belong to no client
        client = self._client_by_key.get(key)
        if client is None:
            cid = self.client_names.next(rec.pid)
            client = Client(cid, rec.pid, first_ns=rec.time_ns, last_ns=rec.time_ns, first_seq=rec.seq,
                            last_seq=rec.seq, gsp_session=self.gsp_session if rec.source == Source.GSP else None)
            self.clients[cid] = client
            self._client_by_key[key] = client
            self.tl.set(rec.time_ns, rec.seq, client.entity, "state", LaneState.RUNNING)
        return client

    def _call_info(self, call: Call, meaning: CallMeaning, client: Client | None) -> CallInfo:
        d: Decoded = meaning.decoded
        first, last = call.first, call.last
        closed = call.state in (CallState.COMPLETE, CallState.RESUMED) and len(call.records) > 1
        single = call.state is CallState.SINGLE
        return CallInfo(
            pid=first.pid, tid=first.tid, call_id=first.call_id, client_id=client.id if client else None,
            source=first.source, op=first.op, name=d.name, detail=d.detail, status=d.status,
            status_name=d.status_name, ok=d.ok, enter_seq=first.seq,
            exit_seq=last.seq if closed or single else None, t_enter=first.time_ns,
            t_exit=last.time_ns if closed or single else None,
            in_flight=call.state in (CallState.IN_FLIGHT, CallState.UNFINISHED),
            handles=dict(d.handles), bytes=_buffer_bytes(call),
            locks=tuple(e.lock for e in meaning.events if isinstance(e, ev.LockTaken)),
        )

    # -- RM objects --------------------------------------------------------------------

    def add_object(self, client_id: str | None, h_client: int, handle: int, parent: int | None, cls: int | None,
                   category: Category, class_name: str, alloc_seq: int, alloc_ns: int, status: str) -> RmObject | None:
        """The object ``handle`` of RM client ``h_client``, allocated by the call whose first record is
        ``alloc_seq`` and whose last one came at ``alloc_ns``."""
        client = self.clients.get(client_id or "")
        if client is None:
            return None
        if category is Category.ROOT:
            client.rm_clients.append(handle)
            if client.h_client is None:
                client.h_client = handle
        parent_obj = self._by_handle.get((h_client, parent)) if parent is not None else None
        base = parent_obj.stable_name if parent_obj is not None else ""
        order_key = (client.id, base, class_name)
        order = self._siblings.get(order_key, 0)  # a Counter's [] of a new key runs its __missing__
        self._siblings[order_key] = order + 1
        stable = stable_name(base, class_name, order)
        obj = RmObject(client.id, handle, parent, cls if cls is not None else -1, class_name, stable, alloc_seq,
                       alloc_ns, h_client=h_client, status=status, category=category)
        self.objects[(client.id, handle)] = obj
        self.object_list.append(obj)
        self._by_handle[(h_client, handle)] = obj
        if parent is not None:
            self._children.setdefault((h_client, parent), []).append(handle)
        return obj

    def free_object(self, h_client: int, handle: int, seq: int, t: int, by: FreedBy = FreedBy.RM_FREE) -> None:
        obj = self._by_handle.get((h_client, handle))
        if obj is None or obj.free_ns is not None:
            return
        for child in self._children.pop((h_client, handle), ()):
            self.free_object(h_client, child, seq, t, by)
        siblings = self._children.get((h_client, obj.parent)) if obj.parent is not None else None
        if siblings is not None and handle in siblings:
            siblings.remove(handle)
        obj.free_seq, obj.free_ns, obj.freed_by = seq, t, by
        chan = self._channel_by_handle.pop((h_client, handle), None)
        if chan is not None:
            self.channel_flag(chan, LaneState.FREED, True, t, seq)
            if chan.tsg is not None:
                self._tsg_channels.get((h_client, chan.tsg), []).remove(chan)
            same = self._channels_by_bare_handle[handle]
            if len(same) > FREED_KEPT:
                del same[0]

    # -- channels and ranks --------------------------------------------------------------

    def add_tsg(self, obj: RmObject, engine_type: int | None) -> None:
        if engine_type:
            self._tsg_engine[(obj.h_client, obj.handle)] = engine_type

    def add_channel(self, obj: RmObject, alloc: ev.ChannelAllocated, t: int, seq: int) -> Channel:
        n = self._channel_counts[obj.client_id]
        self._channel_counts[obj.client_id] += 1
        # A channel in a TSG names no engine of its own (NV2080_ENGINE_TYPE_NULL): it runs on the TSG's.
        engine_type = alloc.engine_type or self._tsg_engine.get((obj.h_client, obj.parent or 0))
        engine, rank = self.engine(engine_type)
        tsg_obj = self._by_handle.get((obj.h_client, obj.parent)) if obj.parent is not None else None
        chan = Channel(f"{obj.client_id}/ch{n}", obj.client_id, obj.handle, obj.h_client, obj.class_name,
                       obj.stable_name, engine=engine, engine_type=engine_type, rank=rank,
                       tsg=obj.parent if tsg_obj is not None and tsg_obj.category is Category.TSG else None,
                       ring_va=alloc.ring_va)
        self.channels[chan.id] = chan
        self._channel_by_handle[(obj.h_client, obj.handle)] = chan
        self._channels_by_bare_handle.setdefault(obj.handle, []).append(chan)
        if chan.tsg is not None:
            self._tsg_channels.setdefault((obj.h_client, chan.tsg), []).append(chan)
        entity = chan.entity
        self.tl.set(t, seq, entity, "engine", engine)
        if rank is not None:
            self.tl.set(t, seq, entity, "rank", rank)
        self.channel_flag(chan, LaneState.ALLOCATED, True, t, seq)
        return chan

    def engine(self, engine_type: int | None) -> tuple[str | None, int | None]:
        """``Interpreter.engine``, worked out once per engine type (every channel's allocation asks)."""
        found = self._engines.get(engine_type)
        if found is None:
            found = self._engines[engine_type] = self.interpreter.engine(engine_type)
        return found

    def channel(self, h_client: int | None, handle: int | None, client_id: str | None = None) -> Channel | None:
        """The channel ``handle`` of RM client ``h_client``; without one (host messages name
        only the channel), the newest live channel with that handle of ``client_id``, else of anyone."""
        if handle is None:
            return None
        found = self._channel_by_handle.get((h_client or 0, handle))
        if found is not None:
            return found
        candidates = self._channels_by_bare_handle.get(handle, [])
        live = [c for c in candidates if LaneState.FREED not in self._channel_flags.get(c.id, ())]
        for pool in ([c for c in live if c.client_id == client_id], [c for c in candidates if c.client_id == client_id],
                     live, candidates):
            if pool:
                return pool[-1]
        return None

    def channels_of(self, h_client: int, handle: int) -> list[Channel]:
        """The channel with this handle, or every channel of the TSG with this handle."""
        chan = self._channel_by_handle.get((h_client, handle))
        return [chan] if chan is not None else list(self._tsg_channels.get((h_client, handle), ()))

    def channel_flag(self, chan: Channel, flag: LaneState, on: bool, t: int, seq: int, detail: str = "") -> None:
        self.channel_flags(chan, {flag: on}, t, seq, detail)

    def channel_flags(self, chan: Channel, changes: dict[LaneState, bool], t: int, seq: int, detail: str = "") -> None:
        self._flags(chan.entity, self._channel_flags.setdefault(chan.id, set()), CHANNEL_PRECEDENCE,
                    LaneState.ALLOCATED, changes, t, seq, detail)

    def _flags(self, entity: str, flags: set[LaneState], order: tuple[LaneState, ...], default: LaneState,
               changes: dict[LaneState, bool], t: int, seq: int, detail: str) -> None:
        """Apply flag changes together; the lane state is the first flag set in ``order``."""
        before = _top(flags, order)
        for flag, on in changes.items():
            (flags.add if on else flags.discard)(flag)
        after = _top(flags, order)
        if after != before or detail:
            self.tl.set(t, seq, entity, "state", after or default)
            if detail:
                self.tl.set(t, seq, entity, "detail", detail)

    def rank(self, index: int) -> Rank:
        rid = f"rank{index}"
        found = self.ranks.get(rid)
        if found is None:
            found = self.ranks[rid] = Rank(rid, index)
        return found

    def rank_flags(self, rank: Rank, changes: dict[LaneState, bool], t: int, seq: int, detail: str = "") -> None:
        self._flags(rank.entity, self._rank_flags.setdefault(rank.id, set()), RANK_PRECEDENCE, LaneState.IDLE,
                    changes, t, seq, detail)

    def counter(self, name: str, value: int, t: int, seq: int) -> None:
        """A host counter's value; a snapshot that repeats it is no change (no transition)."""
        if self._counters.get(name) != value:
            self._counters[name] = value
            self.tl.set(t, seq, COUNTERS_ENTITY, name, value)

    def process_at(self, pid: int, t_ns: int) -> Process:
        """Process ``pid``, made at ``t_ns`` if the fold has none: a fork's child before its first record, and
        a pid whose process a streaming fold forgot (``forget_client``) and a new process was given (a fold
        from the table makes each pid's process only at its first record)."""
        proc = self.processes.get(pid)
        if proc is None:
            proc = self.processes[pid] = Process(pid, first_ns=t_ns, last_ns=t_ns)
        return proc

    def forget_client(self, pid: int, through_seq: int | None = None) -> list[str]:
        """Drop what the fold keeps of process ``pid``'s objects and channels; the entities of those channels.

        For a fold that streams (``rmtrace.export.fold``): once a process has exited and its
        transitions are out, nothing later needs its objects, channels or their names, and
        keeping them would make memory grow with the trace.  Its RM clients died with it (the
        exit frees them), so a later call naming one of their handles names a new object; a host
        message naming only a channel handle finds the live channels, as it would first anyway.
        The ``Client`` itself and its count of channels stay (a few hundred bytes), so that
        records of the pid after its exit (a replay's verdict marks) still name it and a channel
        id is never given twice.  Map entries that a newer object or channel has taken over
        (handles are reused) stay too.  ``through_seq``: only what calls whose first record is at
        or before it allocated (the exit's seq): a fold that runs ahead of its caller may already
        hold what a new process given the same pid made, which is that process's (the pid's
        client is one client for both), the numbering of its objects' stable names too.
        """
        self.processes.pop(pid, None)
        client = self._client_by_key.get(pid)
        if client is None:
            return []
        gone = client.id

        def made(obj: RmObject) -> bool:
            return obj.client_id == gone and (through_seq is None or obj.alloc_seq <= through_seq)

        for obj_key in [k for k, obj in self.objects.items() if k[0] == gone and made(obj)]:
            del self.objects[obj_key]
        old = {(obj.h_client, obj.handle, obj.stable_name) for obj in self.object_list if made(obj)}
        self.object_list[:] = [obj for obj in self.object_list if not made(obj)]
        for handle_key in [k for k, obj in self._by_handle.items() if made(obj)]:
            del self._by_handle[handle_key]
            self._children.pop(handle_key, None)
            self._tsg_engine.pop(handle_key, None)
            self._tsg_channels.pop(handle_key, None)
        if not any(obj.client_id == gone for obj in self.object_list):
            for sibling_key in [k for k in self._siblings if k[0] == gone]:
                del self._siblings[sibling_key]
        channels = [chan for chan in self.channels.values()
                    if chan.client_id == gone and (chan.h_client, chan.handle, chan.stable_name) in old]
        for chan in channels:
            del self.channels[chan.id]
            self._channel_flags.pop(chan.id, None)
            if self._channel_by_handle.get((chan.h_client, chan.handle)) is chan:
                del self._channel_by_handle[(chan.h_client, chan.handle)]
            same = self._channels_by_bare_handle.get(chan.handle)
            if same is not None:
                same[:] = [c for c in same if c is not chan]
                if not same:
                    del self._channels_by_bare_handle[chan.handle]
        return [chan.entity for chan in channels]


def _top(flags: set[LaneState], order: tuple[LaneState, ...]) -> LaneState | None:
    for f in order:
        if f in flags:
            return f
    return None


# --------------------------------------------------------------------------- effects, one per event type

Effect = Callable[[Folder, Any, CallMeaning, CallInfo], None]


def _end(m: CallMeaning) -> tuple[int, int]:
    """When a call's effects happen: at its last record."""
    return m.call.last.time_ns, m.call.last.seq


def _object(f: Folder, e: ev.ObjectAllocated, m: CallMeaning, info: CallInfo) -> None:
    f.add_object(info.client_id, e.h_client, e.handle, e.parent, e.class_id, e.category,
                 f.interpreter.class_name(e.class_id), m.call.first.seq, m.call.last.time_ns,
                 m.decoded.status_name or "NV_OK")


def _dup(f: Folder, e: ev.ObjectDuplicated, m: CallMeaning, info: CallInfo) -> None:
    duplicate(f, info.client_id, e.h_client, e.handle, e.parent, e.src_client, e.src_handle, m.call.first.seq,
              m.call.last.time_ns, m.decoded.status_name or "NV_OK")


def duplicate(f: Folder, client_id: str | None, h_client: int, handle: int, parent: int | None, src_client: int,
              src_handle: int, alloc_seq: int, alloc_ns: int, status: str) -> None:
    """``handle`` now names the object ``src_handle`` of ``src_client``: an object of the same class."""
    src = f._by_handle.get((src_client, src_handle))
    f.add_object(client_id, h_client, handle, parent, src.cls if src else None,
                 src.category if src else Category.OTHER, src.class_name if src else "DUP", alloc_seq, alloc_ns,
                 status)


def channel_allocated(f: Folder, e: ev.ChannelAllocated, alloc_seq: int, t: int, seq: int) -> None:
    """The object the call whose first record is ``alloc_seq`` allocated is a channel."""
    obj = f._by_handle.get((e.h_client, e.handle))
    if obj is not None and obj.alloc_seq == alloc_seq:
        f.add_channel(obj, e, t, seq)


def tsg_allocated(f: Folder, e: ev.ChannelGroupAllocated, alloc_seq: int) -> None:
    obj = f._by_handle.get((e.h_client, e.handle))
    if obj is not None and obj.alloc_seq == alloc_seq:
        f.add_tsg(obj, e.engine_type)


def _free(f: Folder, e: ev.ObjectFreed, m: CallMeaning, info: CallInfo) -> None:
    if not free(f, e.h_client, e.handle, *_end(m)):
        f.stray_frees.append(info)


def free(f: Folder, h_client: int, handle: int, t: int, seq: int) -> bool:
    """RM_FREE of ``handle``; False when the trace never saw it allocated (a stray free)."""
    if not h_client or h_client == handle:  # a root client freed by itself (or named without its client)
        h_client = handle if (handle, handle) in f._by_handle else h_client
    if (h_client, handle) not in f._by_handle:
        return False
    f.free_object(h_client, handle, seq, t)
    return True


def token_issued(f: Folder, e: ev.WorkTokenIssued, t: int, seq: int) -> None:
    chan = f.channel(e.h_client, e.channel)
    if chan is not None and e.token is not None:
        chan.token = e.token
        f.tl.set(t, seq, chan.entity, "token", e.token)


def bound(f: Folder, e: ev.ChannelBound, t: int, seq: int) -> None:
    for chan in f.channels_of(e.h_client, e.handle):
        if e.engine_type is not None and chan.engine_type is None:
            chan.engine_type = e.engine_type
            chan.engine, chan.rank = f.engine(e.engine_type)
        f.channel_flag(chan, LaneState.BOUND, True, t, seq)


def scheduled(f: Folder, e: ev.ChannelScheduled, t: int, seq: int) -> None:
    for chan in f.channels_of(e.h_client, e.handle):
        f.channel_flag(chan, LaneState.SCHEDULED, e.enabled, t, seq)


def _uvm_gpus(f: Folder, info: CallInfo, m: CallMeaning, gpu: bytes, registered: bool) -> None:
    client = f.clients.get(info.client_id or "")
    if client is not None:
        (client.uvm_gpus.add if registered else client.uvm_gpus.discard)(gpu)
        t, seq = _end(m)
        f.tl.set(t, seq, client.entity, "uvm_gpus", len(client.uvm_gpus))


def uvm_channel(f: Folder, h_client: int, handle: int, registered: bool, t: int, seq: int) -> None:
    """UVM (un)registered the channel ``handle`` of RM client ``h_client``."""
    chan = f.channel(h_client, handle)
    if chan is not None:
        chan.uvm_registered = registered
        f.channel_flag(chan, LaneState.REGISTERED, registered, t, seq)


# -- the host service ------------------------------------------------------------------


def _host_channel(f: Folder, handle: int, info: CallInfo, h_client: int | None = None) -> Channel | None:
    return f.channel(h_client, handle, info.client_id)


def _host_registered(f: Folder, e: ev.HostChannelRegistered, m: CallMeaning, info: CallInfo) -> None:
    rank = f.rank(e.rank) if e.rank is not None else None  # the host knows the rank, whoever the channel is
    chan = _host_channel(f, e.channel, info, e.h_client)
    if chan is None:
        return
    if rank is not None:
        chan.rank = rank.index
        f.tl.set(*_end(m), chan.entity, "rank", rank.index)
    if e.ring_va:
        chan.ring_va = e.ring_va


def _published(f: Folder, e: ev.Published, m: CallMeaning, info: CallInfo) -> None:
    chan = _host_channel(f, e.channel, info)
    t, seq = _end(m)
    if chan is not None and e.rc == 0:
        f.channel_flag(chan, LaneState.PUBLISHED, True, t, seq)
    f.counter("pub_calls", e.pub_calls, t, seq)


def _hint(f: Folder, e: ev.SemaHint, m: CallMeaning, info: CallInfo) -> None:
    chan = _host_channel(f, e.channel, info)
    if chan is None:
        return
    t, seq = _end(m)
    if e.rc == 0:
        f.channel_flags(chan, {LaneState.COMPLETED: False, LaneState.WAITING: True}, t, seq,
                        f"waiting for value {e.value}")
    else:
        f.channel_flag(chan, LaneState.STALE, True, t, seq, f"completion hint rc={e.rc}")


def _completed(f: Folder, e: ev.WorkCompleted, m: CallMeaning, info: CallInfo) -> None:
    if e.rc != 0:
        return
    t, seq = _end(m)
    chan = _host_channel(f, e.channel, info)
    if chan is not None:
        f.channel_flags(chan, {LaneState.WAITING: False, LaneState.COMPLETED: True}, t, seq)
    f.counter(COMPLETION_COUNTERS[e.how], e.counter, t, seq)


def _acquire(f: Folder, e: ev.SemaAcquire, m: CallMeaning, info: CallInfo) -> None:
    chan = _host_channel(f, e.channel, info)
    if chan is not None and e.rc == 0:
        f.channel_flag(chan, LaneState.WAITING, True, *_end(m), f"acquire {e.value}")


def _latch(f: Folder, e: ev.LatchArmed | ev.LatchFired, m: CallMeaning, info: CallInfo) -> None:
    if e.rank is None:
        return
    fired = isinstance(e, ev.LatchFired)
    rank = f.rank(e.rank)
    rank.latch_armed = not fired
    rank.latch_generation = e.generation
    rank.last_channel = e.channel
    if fired:
        rank.fired_ns = m.call.last.time_ns
    chan = _host_channel(f, e.channel, info)
    rank.last_channel_id = chan.id if chan is not None else None
    f.rank_flags(rank, {LaneState.LATCH_ARMED: not fired, LaneState.LATCH_FIRED: fired}, *_end(m),
                 f"{'fired' if fired else 'armed'} by channel {e.channel:#x} (generation {e.generation})")


def _drain(f: Folder, e: ev.DrainHeld | ev.DrainReleased, m: CallMeaning, info: CallInfo) -> None:
    t, seq = _end(m)
    hold = isinstance(e, ev.DrainHeld)
    if e.rank is not None:
        rank = f.rank(e.rank)
        if hold != rank.drain_held:
            rank.held_ns = t if hold else None
        rank.drain_held = hold
        f.rank_flags(rank, {LaneState.DRAIN_HELD: hold}, t, seq)
    f.counter("drain_held", e.held, t, seq)


def _session_reset(f: Folder, e: ev.HostSessionReset, m: CallMeaning, info: CallInfo) -> None:
    f.counter("session", e.new_session, *_end(m))


def _counters(f: Folder, e: ev.HostCounters, m: CallMeaning, info: CallInfo) -> None:
    t, seq = _end(m)
    for name, value in e.values:
        f.counter(name, value, t, seq)


# -- GSP --------------------------------------------------------------------------------


def _gsp_request(f: Folder, e: ev.GspRequest, m: CallMeaning, info: CallInfo) -> None:
    call = m.call
    request = call.first
    response = call.last if len(call.records) > 1 and m.first(ev.GspReply) is not None else None
    f.gsp.append(GspExchange(m.decoded.detail or m.decoded.name, e.sequence, request.seq,
                             response.seq if response is not None else None, request.time_ns,
                             response.time_ns if response is not None else None, m.decoded.status, info.client_id))


def _gsp_session(f: Folder, e: ev.GspSessionStarted, m: CallMeaning, info: CallInfo) -> None:
    first = m.call.first
    f.counter("gsp_sessions", f.gsp_session, first.time_ns, first.seq)


# -- processes and marks ----------------------------------------------------------------


def _forked(f: Folder, e: ev.ProcessForked, m: CallMeaning, info: CallInfo) -> None:
    rec = m.call.first
    f.process_at(e.child, rec.time_ns).ppid = rec.pid


def _executed(f: Folder, e: ev.ProcessExecuted, m: CallMeaning, info: CallInfo) -> None:
    rec = m.call.first
    f.process_at(rec.pid, rec.time_ns).argv = e.argv


def _exited(f: Folder, e: ev.ProcessExited, m: CallMeaning, info: CallInfo) -> None:
    rec = m.call.first
    f.process_at(rec.pid, rec.time_ns).exit_status = e.status
    client = f._client_by_key.get(rec.pid)
    if client is not None:
        f.tl.set(rec.time_ns, rec.seq, client.entity, "state", LaneState.EXITED)
        for h_client in client.rm_clients:  # the kernel frees what the process left behind
            f.free_object(h_client, h_client, rec.seq, rec.time_ns, by=FreedBy.EXIT)


def _stopped(f: Folder, e: ev.RecordingStopped, m: CallMeaning, info: CallInfo) -> None:
    f.stop_reason = dict(e.info)


def _lost(f: Folder, e: ev.RecordsLost, m: CallMeaning, info: CallInfo) -> None:
    f.lost.append(dict(e.info))


def _marked(f: Folder, e: ev.CallInFlightAtStop, m: CallMeaning, info: CallInfo) -> None:
    f.marked_in_flight.add((e.pid, e.call_id))


EFFECTS: Mapping[type[ev.Event], Effect] = {
    ev.ObjectAllocated: _object,
    ev.ObjectDuplicated: _dup,
    ev.ChannelAllocated: lambda f, e, m, info: channel_allocated(f, e, m.call.first.seq, *_end(m)),
    ev.ChannelGroupAllocated: lambda f, e, m, info: tsg_allocated(f, e, m.call.first.seq),
    ev.ObjectFreed: _free,
    ev.WorkTokenIssued: lambda f, e, m, info: token_issued(f, e, *_end(m)),
    ev.ChannelBound: lambda f, e, m, info: bound(f, e, *_end(m)),
    ev.ChannelScheduled: lambda f, e, m, info: scheduled(f, e, *_end(m)),
    ev.UvmRegistered: lambda f, e, m, info: _uvm_gpus(f, info, m, e.gpu, True),
    ev.UvmUnregistered: lambda f, e, m, info: _uvm_gpus(f, info, m, e.gpu, False),
    ev.UvmChannelRegistered: lambda f, e, m, info: uvm_channel(f, e.h_client, e.channel, True, *_end(m)),
    ev.UvmChannelUnregistered: lambda f, e, m, info: uvm_channel(f, e.h_client, e.channel, False, *_end(m)),
    ev.HostChannelRegistered: _host_registered,
    ev.Published: _published,
    ev.SemaHint: _hint,
    ev.WorkCompleted: _completed,
    ev.SemaAcquire: _acquire,
    ev.LatchArmed: _latch,
    ev.LatchFired: _latch,
    ev.DrainHeld: _drain,
    ev.DrainReleased: _drain,
    ev.HostSessionReset: _session_reset,
    ev.HostCounters: _counters,
    ev.GspRequest: _gsp_request,
    ev.GspSessionStarted: _gsp_session,
    ev.ProcessForked: _forked,
    ev.ProcessExecuted: _executed,
    ev.ProcessExited: _exited,
    ev.RecordingStopped: _stopped,
    ev.RecordsLost: _lost,
    ev.CallInFlightAtStop: _marked,
}
"""What each event does to the session's state; events not listed change nothing the model keeps."""


def _buffer_bytes(call: Call) -> int:
    """The bytes of every buffer of a call's records (loops, not a generator: it runs once per call folded)."""
    n = 0
    for rec in call.records:
        for b in rec.buffers:
            n += len(b.data)
    return n

"""Fold decoded calls, in trace order, into the session's state.

Pure: no I/O, no UI.  ``Folder.fold(call)`` takes one call from the
decoders' pairing (an enter with its exit, a GSP request with its response,
or a single message), names it, decodes it as deep as its handler needs and
applies its effect through one handler per operation name, looked up in
``HANDLERS`` (RM controls in ``CONTROL_HANDLERS`` by command name).  A call
the tables do not know is still counted as a call of its client.

Effects of a call apply when it returned successfully; its transitions carry
the time of its exit (of its enter for a call still in flight).
"""

from __future__ import annotations

import fnmatch
from collections import Counter
from collections.abc import Callable
from typing import Any

from rmtrace.calls import Call, CallState
from rmtrace.decoders import Decoded, DecoderSet, Level
from rmtrace.record import MarkOp, Record, Role, Source, SysOp
from rmtrace.session.entities import CallInfo, Channel, Client, GspExchange, Process, Rank, RmObject
from rmtrace.session.timeline import COUNTERS_ENTITY, Timeline

ROOT_CLASSES = frozenset({"NV01_ROOT", "NV01_ROOT_NON_PRIV", "NV01_ROOT_CLIENT"})
CHANNEL_CLASS = "*_CHANNEL_GPFIFO_*"
TSG_CLASS = "*_CHANNEL_GROUP_*"
NO_RANK = 0xFFFFFFFF

CHANNEL_PRECEDENCE = ("freed", "stale", "waiting", "completed", "published", "registered", "scheduled", "bound",
                      "allocated")
"""A channel's lane shows the first of its flags in this order."""
RANK_PRECEDENCE = ("drain_held", "latch_fired", "latch_armed")


def engine_info(profile: Any, engine_type: int | None) -> tuple[str | None, int | None]:
    """(engine name, CE rank) of an NV2080 engine type, from the profile's engine table."""
    if engine_type is None:
        return None, None
    engines = getattr(profile, "engine_types", None) or {}
    name = engines.get(engine_type)
    if name is None:
        return f"engine {engine_type:#x}", None
    short = name.removeprefix("NV2080_ENGINE_TYPE_")
    rank = int(short[4:]) if short.startswith("COPY") and short[4:].isdigit() else None
    return short, rank


class Folder:
    """The session's state while the trace is folded."""

    def __init__(self, decoders: DecoderSet, timeline: Timeline) -> None:
        self.decoders = decoders
        self.profile = decoders.profile
        self.tl = timeline
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
        self._channel_flags: dict[str, set[str]] = {}
        self._channel_counts: Counter = Counter()
        self._tsg_channels: dict[tuple[int, int], list[Channel]] = {}
        self._tsg_engine: dict[tuple[int, int], int] = {}  # a TSG's engine type: its channels run there
        self.ranks: dict[str, Rank] = {}
        self._rank_flags: dict[str, set[str]] = {}
        self.calls: list[CallInfo] = []
        self.gsp: list[GspExchange] = []
        self.gsp_session = 0
        self.seq_client: list[tuple[int, str]] = []  # (seq, client id) for every record of a client
        self.stray_frees: list[CallInfo] = []
        self._counters: dict[str, int] = {}
        self.stop_reason: dict | None = None
        self.lost: list[dict] = []
        self._class_ids = {info.name: cid for cid, info in self.profile.classes.items()}

    # -- entry ---------------------------------------------------------------------------

    def fold(self, call: Call) -> None:
        first = call.first
        label = self.decoders.label(first)
        handler = HANDLERS.get(label.name)
        level = Level.CALL
        if handler is not None and handler.full(label.detail):
            level = Level.FULL
        decoded = self.decoders.decode(call, level)
        self._touch_process(call)
        if label.name == GSP_SESSION_START:
            self.gsp_session += 1  # the boot handshake's INIT_DONE opens the session it starts
        client = self._client_for(first)
        info = self._call_info(call, decoded, client)
        if client is not None:
            for rec in call.records:
                self.seq_client.append((rec.seq, client.id))
            client.last_ns = max(client.last_ns, call.last.time_ns)
            client.last_seq = max(client.last_seq, call.last.seq)
        self.calls.append(info)
        if handler is not None and (decoded.ok or handler.always):
            handler.apply(self, decoded, info, call)

    # -- clients and processes ---------------------------------------------------------

    def _touch_process(self, call: Call) -> None:
        for rec in call.records:
            proc = self.processes.get(rec.pid)
            if proc is None:
                proc = self.processes[rec.pid] = Process(rec.pid, first_ns=rec.time_ns)
            proc.last_ns = max(proc.last_ns, rec.time_ns)
            proc.threads.add(rec.tid)

    def _client_for(self, rec: Record) -> Client | None:
        """The client a GPU record belongs to: its process, or its GSP session when no process is known."""
        if rec.source in (Source.SYS, Source.MARK):
            client = self._client_by_key.get(rec.pid)
            if client is not None or not _opens_nvidia_device(rec):
                return client
            key: Any = rec.pid
        elif rec.pid:
            key = rec.pid
        elif rec.source == Source.GSP:
            key = ("gsp", self.gsp_session)
        else:
            return None  # host-internal sema events belong to no client
        client = self._client_by_key.get(key)
        if client is None:
            cid = f"c{len(self.clients) + 1}"
            client = Client(cid, rec.pid, first_ns=rec.time_ns, last_ns=rec.time_ns, first_seq=rec.seq,
                            last_seq=rec.seq, gsp_session=self.gsp_session if rec.source == Source.GSP else None)
            self.clients[cid] = client
            self._client_by_key[key] = client
            self.tl.set(rec.time_ns, rec.seq, client.entity, "state", "running")
        return client

    def _call_info(self, call: Call, d: Decoded, client: Client | None) -> CallInfo:
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
            handles=dict(d.handles), bytes=sum(len(b.data) for r in call.records for b in r.buffers),
        )

    # -- RM objects --------------------------------------------------------------------

    def class_id(self, d: Decoded) -> int:
        return self._class_ids.get(d.detail or "", -1)

    def add_object(self, d: Decoded, info: CallInfo, call: Call, class_name: str, cls: int) -> RmObject | None:
        client = self.clients.get(info.client_id or "")
        handle = d.handles.get("hObject")
        if client is None or handle is None:
            return None
        h_client = d.handles.get("hClient") or 0
        parent = d.handles.get("hParent")
        if class_name in ROOT_CLASSES:
            h_client, parent = handle, None
            client.rm_clients.append(handle)
            if client.h_client is None:
                client.h_client = handle
        parent_obj = self._by_handle.get((h_client, parent)) if parent is not None else None
        base = parent_obj.stable_name if parent_obj is not None else ""
        order_key = (client.id, base, class_name)
        order = self._siblings[order_key]
        self._siblings[order_key] += 1
        stable = f"{base}/{class_name}#{order}" if base else f"{class_name}#{order}"
        t = call.last.time_ns
        obj = RmObject(client.id, handle, parent, cls, class_name, stable, call.first.seq, t, h_client=h_client,
                       status=d.status_name or "NV_OK")
        self.objects[(client.id, handle)] = obj
        self.object_list.append(obj)
        self._by_handle[(h_client, handle)] = obj
        if parent is not None:
            self._children.setdefault((h_client, parent), []).append(handle)
        return obj

    def free_object(self, h_client: int, handle: int, seq: int, t: int, by: str = "RM_FREE") -> None:
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
            self.channel_flag(chan, "freed", True, t, seq)
            if chan.tsg is not None:
                self._tsg_channels.get((h_client, chan.tsg), []).remove(chan)
            same = self._channels_by_bare_handle[handle]
            if len(same) > 8:  # keep a few freed ones for late host messages, not every one ever seen
                del same[0]

    # -- channels and ranks --------------------------------------------------------------

    def add_tsg(self, obj: RmObject, fields: Any) -> None:
        engine_type = _get(fields, "engineType")
        if engine_type:
            self._tsg_engine[(obj.h_client, obj.handle)] = engine_type

    def add_channel(self, obj: RmObject, fields: Any, t: int, seq: int) -> Channel:
        n = self._channel_counts[obj.client_id]
        self._channel_counts[obj.client_id] += 1
        # A channel in a TSG names no engine of its own (NV2080_ENGINE_TYPE_NULL): it runs on the TSG's.
        engine_type = _get(fields, "engineType") or self._tsg_engine.get((obj.h_client, obj.parent or 0))
        engine, rank = engine_info(self.profile, engine_type)
        tsg_obj = self._by_handle.get((obj.h_client, obj.parent)) if obj.parent is not None else None
        chan = Channel(f"{obj.client_id}/ch{n}", obj.client_id, obj.handle, obj.h_client, obj.class_name,
                       obj.stable_name, engine=engine, engine_type=engine_type, rank=rank,
                       tsg=obj.parent if tsg_obj is not None and fnmatch.fnmatch(tsg_obj.class_name, TSG_CLASS) else None,
                       ring_va=_get(fields, "gpFifoOffset"))
        self.channels[chan.id] = chan
        self._channel_by_handle[(obj.h_client, obj.handle)] = chan
        self._channels_by_bare_handle.setdefault(obj.handle, []).append(chan)
        if chan.tsg is not None:
            self._tsg_channels.setdefault((obj.h_client, chan.tsg), []).append(chan)
        self.tl.set(t, seq, chan.entity, "engine", engine)
        if rank is not None:
            self.tl.set(t, seq, chan.entity, "rank", rank)
        self.channel_flag(chan, "allocated", True, t, seq)
        return chan

    def channel(self, h_client: int | None, handle: int | None, client_id: str | None = None) -> Channel | None:
        """The channel ``handle`` of RM client ``h_client``; without one (host messages name
        only the channel), the newest live channel with that handle of ``client_id``, else of anyone."""
        if handle is None:
            return None
        found = self._channel_by_handle.get((h_client or 0, handle))
        if found is not None:
            return found
        candidates = self._channels_by_bare_handle.get(handle, [])
        live = [c for c in candidates if "freed" not in self._channel_flags.get(c.id, ())]
        for pool in ([c for c in live if c.client_id == client_id], [c for c in candidates if c.client_id == client_id],
                     live, candidates):
            if pool:
                return pool[-1]
        return None

    def channels_of(self, h_client: int, handle: int) -> list[Channel]:
        """The channel with this handle, or every channel of the TSG with this handle."""
        chan = self._channel_by_handle.get((h_client, handle))
        return [chan] if chan is not None else list(self._tsg_channels.get((h_client, handle), ()))

    def channel_flag(self, chan: Channel, flag: str, on: bool, t: int, seq: int, detail: str = "") -> None:
        self.channel_flags(chan, {flag: on}, t, seq, detail)

    def channel_flags(self, chan: Channel, changes: dict[str, bool], t: int, seq: int, detail: str = "") -> None:
        self._flags(chan.entity, self._channel_flags.setdefault(chan.id, set()), CHANNEL_PRECEDENCE, "allocated",
                    changes, t, seq, detail)

    def _flags(self, entity: str, flags: set[str], order: tuple[str, ...], default: str, changes: dict[str, bool],
               t: int, seq: int, detail: str) -> None:
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

    def rank_flags(self, rank: Rank, changes: dict[str, bool], t: int, seq: int, detail: str = "") -> None:
        self._flags(rank.entity, self._rank_flags.setdefault(rank.id, set()), RANK_PRECEDENCE, "idle", changes,
                    t, seq, detail)

    def counter(self, name: str, value: int, t: int, seq: int) -> None:
        """A host counter's value; a snapshot that repeats it is no change (no transition)."""
        if self._counters.get(name) != value:
            self._counters[name] = value
            self.tl.set(t, seq, COUNTERS_ENTITY, name, value)


def _opens_nvidia_device(rec: Record) -> bool:
    """An open of /dev/nvidia*: the moment a process becomes a GPU client."""
    if rec.source != Source.SYS or rec.op != SysOp.OPEN:
        return False
    path = rec.buffer(Role.PATH)
    return path is not None and path.data.startswith(b"/dev/nvidia")


def _top(flags: set[str], order: tuple[str, ...]) -> str | None:
    return next((f for f in order if f in flags), None)


def _get(fields: Any, name: str) -> Any:
    try:
        return fields[name] if fields is not None and name in fields else None
    except TypeError:
        return None


def buffer_value(d: Decoded, role: int, after: bool = True) -> Any:
    """The parsed value of the decoded buffer with ``role`` (the AFTER copy first)."""
    best = None
    for b in d.buffers:
        if b.role == role and b.value is not None:
            if b.when == (2 if after else 1):
                return b.value
            best = best if best is not None else b.value
    return best


# --------------------------------------------------------------------------- handlers


class Handler:
    """What one operation does to the state; ``full`` says when it needs buffers decoded."""

    def __init__(self, apply: Callable[[Folder, Decoded, CallInfo, Call], None],
                 full: Callable[[str | None], bool] = lambda detail: False, always: bool = False) -> None:
        self.apply = apply
        self.full = full
        self.always = always


def _rm_alloc(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
    name = d.detail or "?"
    obj = f.add_object(d, info, call, name, f.class_id(d))
    if obj is not None and fnmatch.fnmatch(name, CHANNEL_CLASS):
        f.add_channel(obj, buffer_value(d, Role.ALLOC_PARAMS), call.last.time_ns, call.last.seq)
    elif obj is not None and fnmatch.fnmatch(name, TSG_CLASS):
        f.add_tsg(obj, buffer_value(d, Role.ALLOC_PARAMS))


def _rm_alloc_memory(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
    """RM_ALLOC_MEMORY (NVOS02) creates an object like RM_ALLOC, its class given as a number."""
    cls = d.args.get("hClass", -1)
    info_cls = f.profile.classes.get(cls)
    f.add_object(d, info, call, info_cls.name if info_cls else f"class {cls:#x}", cls)


def _rm_free(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
    h_client, handle = d.handles.get("hClient"), d.handles.get("hObject")
    if handle is None:
        return
    if h_client in (None, 0) or h_client == handle:
        h_client = handle if (handle, handle) in f._by_handle else h_client
    if (h_client or 0, handle) not in f._by_handle:
        f.stray_frees.append(info)  # RM_FREE of a handle this trace never saw allocated
        return
    f.free_object(h_client or 0, handle, call.last.seq, call.last.time_ns)


def _rm_dup(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
    src = f._by_handle.get((d.handles.get("hClientSrc", 0), d.handles.get("hObjectSrc", 0)))
    f.add_object(d, info, call, src.class_name if src else "DUP", src.cls if src else -1)


def _rm_control(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
    handler = CONTROL_HANDLERS.get(d.detail or "")
    if handler is not None:
        handler(f, d, call, buffer_value(d, Role.PARAMS))


def _work_token(f: Folder, d: Decoded, call: Call, params: Any) -> None:
    chan = f.channel(d.handles.get("hClient"), d.handles.get("hObject"))
    token = _get(params, "workSubmitToken")
    if chan is not None and token is not None:
        chan.token = token
        f.tl.set(call.last.time_ns, call.last.seq, chan.entity, "token", token)


def _bind(f: Folder, d: Decoded, call: Call, params: Any) -> None:
    for chan in f.channels_of(d.handles.get("hClient") or 0, d.handles.get("hObject") or 0):
        engine_type = _get(params, "engineType")
        if engine_type is not None and chan.engine_type is None:
            chan.engine_type = engine_type
            chan.engine, chan.rank = engine_info(f.profile, engine_type)
        f.channel_flag(chan, "bound", True, call.last.time_ns, call.last.seq)


def _schedule(f: Folder, d: Decoded, call: Call, params: Any) -> None:
    enable = bool(_get(params, "bEnable"))
    for chan in f.channels_of(d.handles.get("hClient") or 0, d.handles.get("hObject") or 0):
        f.channel_flag(chan, "scheduled", enable, call.last.time_ns, call.last.seq)


CONTROL_HANDLERS: dict[str, Callable[[Folder, Decoded, Call, Any], None]] = {
    "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN": _work_token,
    "NVA06F_CTRL_CMD_BIND": _bind,
    "NVA06F_CTRL_CMD_GPFIFO_SCHEDULE": _schedule,
    "NVA06C_CTRL_CMD_GPFIFO_SCHEDULE": _schedule,
}
"""RM controls that change channel state, by command name."""


def _uuid(d: Decoded) -> bytes:
    """The GPU UUID a UVM call names: its NvProcessorUuid's bytes, which the summary flattens to ``uuid``."""
    value = d.args.get("uuid")
    return bytes(value) if isinstance(value, (bytes, bytearray, list)) else b""


def _uvm_register_gpu(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
    client = f.clients.get(info.client_id or "")
    if client is not None:
        client.uvm_gpus.add(_uuid(d))
        f.tl.set(call.last.time_ns, call.last.seq, client.entity, "uvm_gpus", len(client.uvm_gpus))


def _uvm_unregister_gpu(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
    client = f.clients.get(info.client_id or "")
    if client is not None:
        client.uvm_gpus.discard(_uuid(d))
        f.tl.set(call.last.time_ns, call.last.seq, client.entity, "uvm_gpus", len(client.uvm_gpus))


def _uvm_channel(registered: bool) -> Callable[[Folder, Decoded, CallInfo, Call], None]:
    def apply(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
        chan = f.channel(d.handles.get("hClient"), d.handles.get("hChannel") or d.args.get("hChannel"))
        if chan is not None:
            chan.uvm_registered = registered
            f.channel_flag(chan, "registered", registered, call.last.time_ns, call.last.seq)
    return apply


# -- the host service's messages (SEMA) --------------------------------------------------


def _sema_channel(f: Folder, d: Decoded, info: CallInfo) -> Channel | None:
    return f.channel(d.args.get("client"), d.args.get("channel"), info.client_id)


def _sema_rank(f: Folder, d: Decoded) -> Rank | None:
    rank = d.args.get("rank")
    return f.rank(rank) if isinstance(rank, int) and rank != NO_RANK else None


def _sema_register(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
    chan = _sema_channel(f, d, info)
    t, seq = call.last.time_ns, call.last.seq
    rank = _sema_rank(f, d)
    if chan is not None and rank is not None:
        chan.rank = rank.index
        f.tl.set(t, seq, chan.entity, "rank", rank.index)
    if chan is not None and d.args.get("ring_va"):
        chan.ring_va = d.args["ring_va"]


def _sema_publish(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
    chan = _sema_channel(f, d, info)
    if chan is not None and d.ok:
        f.channel_flag(chan, "published", True, call.last.time_ns, call.last.seq)
    if "pub_calls" in d.args:
        f.counter("pub_calls", d.args["pub_calls"], call.last.time_ns, call.last.seq)


def _sema_hint(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
    chan = _sema_channel(f, d, info)
    t, seq = call.last.time_ns, call.last.seq
    if chan is None:
        return
    if d.ok:
        f.channel_flags(chan, {"completed": False, "waiting": True}, t, seq, f"waiting for value {d.args.get('value')}")
    else:
        f.channel_flag(chan, "stale", True, t, seq, f"completion hint rc={d.status}")


def _sema_release(counter: str) -> Callable[[Folder, Decoded, CallInfo, Call], None]:
    def apply(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
        t, seq = call.last.time_ns, call.last.seq
        chan = _sema_channel(f, d, info)
        if chan is not None:
            f.channel_flags(chan, {"waiting": False, "completed": True}, t, seq)
        if d.args.get("counter") is not None:
            f.counter(counter, d.args["counter"], t, seq)
    return apply


def _sema_acquire(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
    chan = _sema_channel(f, d, info)
    if chan is not None:
        f.channel_flag(chan, "waiting", True, call.last.time_ns, call.last.seq, f"acquire {d.args.get('value')}")


def _sema_latch(fire: bool) -> Callable[[Folder, Decoded, CallInfo, Call], None]:
    def apply(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
        rank = _sema_rank(f, d)
        if rank is None:
            return
        t, seq = call.last.time_ns, call.last.seq
        rank.latch_armed = not fire
        rank.latch_generation = d.args.get("generation", rank.latch_generation)
        rank.last_channel = d.args.get("channel")
        chan = _sema_channel(f, d, info)
        rank.last_channel_id = chan.id if chan is not None else None
        f.rank_flags(rank, {"latch_armed": not fire, "latch_fired": fire}, t, seq,
                     f"{'fired' if fire else 'armed'} by channel {d.args.get('channel', 0):#x} "
                     f"(generation {rank.latch_generation})")
    return apply


def _sema_drain(hold: bool) -> Callable[[Folder, Decoded, CallInfo, Call], None]:
    def apply(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
        t, seq = call.last.time_ns, call.last.seq
        rank = _sema_rank(f, d)
        if rank is not None:
            rank.drain_held = hold
            f.rank_flags(rank, {"drain_held": hold}, t, seq)
        if d.args.get("held") is not None:
            f.counter("drain_held", d.args["held"], t, seq)
    return apply


def _sema_session(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
    f.counter("session", d.args.get("new_session", 0), call.last.time_ns, call.last.seq)


def _sema_counters(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
    for name, value in d.args.items():
        if name not in ("vgpu", "session") and isinstance(value, int):
            f.counter(name, value, call.last.time_ns, call.last.seq)


# -- GSP ---------------------------------------------------------------------------------


def _gsp_exchange(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
    request = call.first
    response = call.last if len(call.records) > 1 else None
    f.gsp.append(GspExchange(d.detail or d.name, d.args.get("seq"), request.seq,
                             response.seq if response is not None else None, request.time_ns,
                             response.time_ns if response is not None else None, d.status, info.client_id))
    inner = HANDLERS.get(GSP_AS_RM.get(d.name, ""))
    if inner is not None and d.ok:
        inner.apply(f, d, info, call)


GSP_SESSION_START = "GSP_INIT_DONE"


def _gsp_init_done(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
    f.counter("gsp_sessions", f.gsp_session, call.first.time_ns, call.first.seq)


GSP_AS_RM = {"GSP_RM_ALLOC": "RM_ALLOC", "GSP_RM_CONTROL": "RM_CONTROL", "GSP_FREE": "RM_FREE",
             "GSP_DUP_OBJECT": "RM_DUP_OBJECT"}
"""GSP RPCs that carry an RM call: the host's view of the same object tree."""


# -- process events (SYS) and marks ------------------------------------------------------


def _sys(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
    rec = call.first
    proc = f.processes[rec.pid]
    if rec.op == SysOp.FORK and rec.ret > 0:
        child = f.processes.setdefault(rec.ret, Process(rec.ret, first_ns=rec.time_ns, last_ns=rec.time_ns))
        child.ppid = rec.pid
    elif rec.op == SysOp.EXEC:
        argv = rec.buffer(Role.TEXT)
        if argv is not None:
            proc.argv = tuple(a.decode(errors="replace") for a in argv.data.split(b"\0") if a)
    elif rec.op == SysOp.EXIT:
        proc.exit_status = rec.ret
        client = f._client_by_key.get(rec.pid)
        if client is not None:
            f.tl.set(rec.time_ns, rec.seq, client.entity, "state", "exited")
            for h_client in client.rm_clients:  # the kernel frees what the process left behind
                f.free_object(h_client, h_client, rec.seq, rec.time_ns, by="exit")


def _mark(f: Folder, d: Decoded, info: CallInfo, call: Call) -> None:
    rec = call.first
    if rec.op == MarkOp.STOP:
        f.stop_reason = d.args.get("data") if isinstance(d.args.get("data"), dict) else {"text": d.args.get("text")}
    elif rec.op == MarkOp.LOST:
        f.lost.append(d.args.get("data") or {})


def _always(fn: Callable[[Folder, Decoded, CallInfo, Call], None]) -> Handler:
    return Handler(fn, always=True)


HANDLERS: dict[str, Handler] = {
    "RM_ALLOC": Handler(_rm_alloc, full=lambda detail: bool(detail) and (fnmatch.fnmatch(detail, CHANNEL_CLASS)
                                                                          or fnmatch.fnmatch(detail, TSG_CLASS))),
    "RM_ALLOC_MEMORY": Handler(_rm_alloc_memory),
    "RM_FREE": Handler(_rm_free),
    "RM_DUP_OBJECT": Handler(_rm_dup),
    "RM_CONTROL": Handler(_rm_control, full=lambda detail: detail in CONTROL_HANDLERS),
    "UVM_REGISTER_GPU": Handler(_uvm_register_gpu),
    "UVM_UNREGISTER_GPU": Handler(_uvm_unregister_gpu),
    "UVM_REGISTER_CHANNEL": Handler(_uvm_channel(True)),
    "UVM_UNREGISTER_CHANNEL": Handler(_uvm_channel(False)),
    "SEMA_REGISTER_CHANNEL": _always(_sema_register),
    "SEMA_PUBLISH_RING": _always(_sema_publish),
    "SEMA_PUBLISH_USERD": _always(_sema_publish),
    "SEMA_COMPLETION_HINT": _always(_sema_hint),
    "SEMA_RELEASE": Handler(_sema_release("gr_rel")),
    "SEMA_FAKED_COMPLETION": Handler(_sema_release("faked")),
    "SEMA_ACQUIRE": Handler(_sema_acquire),
    "SEMA_LATCH_ARM": _always(_sema_latch(False)),
    "SEMA_LATCH_FIRE": _always(_sema_latch(True)),
    "SEMA_DRAIN_HOLD": _always(_sema_drain(True)),
    "SEMA_DRAIN_RELEASE": _always(_sema_drain(False)),
    "SEMA_SESSION_RESET": _always(_sema_session),
    "SEMA_COUNTERS": _always(_sema_counters),
    "GSP_RM_ALLOC": _always(_gsp_exchange),
    "GSP_RM_CONTROL": _always(_gsp_exchange),
    "GSP_FREE": _always(_gsp_exchange),
    "GSP_DUP_OBJECT": _always(_gsp_exchange),
    "GSP_INIT_DONE": _always(_gsp_init_done),
}
"""One handler per operation name (the decoders' names)."""

for _sys_name in ("fork", "exec", "exit"):
    HANDLERS[_sys_name] = _always(_sys)
for _mark_name in ("MARK_STOP", "MARK_LOST"):
    HANDLERS[_mark_name] = _always(_mark)

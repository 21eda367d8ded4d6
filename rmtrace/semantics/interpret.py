"""From a paired call and its decode to what it means: events, and the values it defines and uses.

``Interpreter(decoders).interpret(call)`` decodes a call as deep as its meaning needs (the
argument struct, and the params buffers only for the calls whose params matter: channel and
TSG allocations, the channel controls, mappings) and returns a :class:`CallMeaning`.
``events(call, decoded)`` is the same for a call decoded elsewhere.

Everything is looked up by number: the source, the operation (escape, UVM command, GSP
function, the sema/sys/mark ops rmtrace defines), then the class or control command,
through the profile's role tables (``rmtrace.decoders.roles``).  One reader per source,
one entry per role; a call no table knows means nothing beyond itself (no events).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from rmtrace.calls import Call, CallState
from rmtrace.decoders import Decoded, DecoderSet, Level
from rmtrace.decoders.base import DecodedBuffer
from rmtrace.decoders.context import context
from rmtrace.decoders.parse import handle_values
from rmtrace.decoders.roles import Category, ControlRole, EscapeRole, GspRole, Roles, UvmRole, roles
from rmtrace.decoders.sema import NO_RANK, DrainReason, ResetReason, SemaOp
from rmtrace.record import MarkOp, Phase, Record, Role, Source, SysOp
from rmtrace.semantics import events as ev
from rmtrace.semantics.events import Applies, Event, LockKind, Ref, RefKind
from rmtrace.semantics.locks import UVM_LOCKS

DEVICE_NODES: tuple[tuple[str, ev.Device], ...] = (
    ("/dev/nvidiactl", ev.Device.CONTROL),
    ("/dev/nvidia-uvm-tools", ev.Device.UVM_TOOLS),
    ("/dev/nvidia-uvm", ev.Device.UVM),
)
"""Device nodes by exact path; /dev/nvidia<N> is a GPU, any other /dev/nvidia* node OTHER."""
NVIDIA_PREFIX = "/dev/nvidia"

HANDLE_USES_SKIP = frozenset({"hClass", "hParent"})
"""Handle members an RM call names that are not objects it needs (a class id; an allocation's
parent is its own use)."""


def device_of(path: str) -> ev.Device:
    """Which NVIDIA device node ``path`` is."""
    for node, device in DEVICE_NODES:
        if path == node:
            return device
    if not path.startswith(NVIDIA_PREFIX):
        return ev.Device.NONE
    return ev.Device.GPU if path[len(NVIDIA_PREFIX):].isdigit() else ev.Device.OTHER


def buffer_value(d: Decoded, role: int, after: bool = True) -> Any:
    """The parsed value of the decoded buffer with ``role`` (the AFTER copy first, unless not ``after``)."""
    return value_of(d.buffers, role, after)


def value_of(buffers: Iterable[DecodedBuffer], role: int, after: bool = True) -> Any:
    """``buffer_value`` over ``buffers``."""
    best = None
    for b in buffers:
        if b.role == role and b.value is not None:
            if b.when == (2 if after else 1):
                return b.value
            best = best if best is not None else b.value
    return best


def field(fields: Any, name: str) -> Any:
    """Member ``name`` of a parsed struct, None when the struct or the member is missing."""
    try:
        return fields[name] if fields is not None and name in fields else None
    except TypeError:
        return None


@dataclass(frozen=True, slots=True)
class CallMeaning:
    """One call, decoded, with its events and the values it defines and uses."""

    call: Call
    decoded: Decoded
    events: tuple[Event, ...]
    uses: tuple[Ref, ...] = ()
    defines: tuple[Ref, ...] = ()

    @property
    def returned(self) -> bool:
        """The recording saw the call end (or it is a single record, whole in itself)."""
        return self.call.state is CallState.SINGLE or self.call.closed

    @property
    def succeeded(self) -> bool:
        return self.decoded.ok is True

    def holds(self, event: Event) -> bool:
        """Whether the recording says ``event`` took effect (see ``Applies``)."""
        applies = event.applies
        return (applies is Applies.ALWAYS or (applies is Applies.ON_RETURN and self.returned)
                or (applies is Applies.ON_SUCCESS and self.succeeded))

    def effective(self) -> Iterator[Event]:
        """The events that took effect, in order."""
        return (e for e in self.events if self.holds(e))

    def first(self, kind: type[ev.Event]) -> Any:
        """The first event of type ``kind``, or None."""
        return next((e for e in self.events if isinstance(e, kind)), None)


Reader = Callable[["Interpreter", Call, Decoded, "_Out"], None]


class _Out:
    """What a reader fills in for one call."""

    __slots__ = ("events", "uses", "defines")

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.uses: list[Ref] = []
        self.defines: list[Ref] = []


class Interpreter:
    """The meaning of the calls of one trace, with that trace's decoders (see the module docstring)."""

    def __init__(self, decoders: DecoderSet) -> None:
        self.decoders = decoders
        self.profile = decoders.profile
        self.roles: Roles = roles(decoders.profile)
        self._names = context(decoders.profile).names

    # -- entry points

    def interpret(self, call: Call) -> CallMeaning:
        """Decode ``call`` as deep as its meaning needs, then interpret it."""
        decoded = self.decoders.decode(call, Level.CALL)
        if self.needs_params(decoded):
            decoded = self.decoders.decode(call, Level.FULL)
        return self.meaning(call, decoded)

    def meaning(self, call: Call, decoded: Decoded) -> CallMeaning:
        out = _Out()
        reader = READERS.get(call.first.source)
        if reader is not None:
            reader(self, call, decoded, out)
        return CallMeaning(call, decoded, tuple(out.events), tuple(out.uses), tuple(out.defines))

    def events(self, call: Call, decoded: Decoded) -> tuple[Event, ...]:
        """The events of a call decoded elsewhere (at ``Level.FULL`` when ``needs_params`` says so)."""
        return self.meaning(call, decoded).events

    def needs_params(self, d: Decoded) -> bool:
        """Whether the call's meaning is in its params buffers (decode it at ``Level.FULL``)."""
        role = self.rm_role(d)
        if role in (EscapeRole.ALLOC, GspRole.RM_ALLOC):
            return self.roles.category(self.class_id(d)) in (Category.CHANNEL, Category.TSG)
        if role in (EscapeRole.CONTROL, GspRole.RM_CONTROL):
            return d.extra.get("cmd") in self.roles.controls
        return role in MAPPINGS  # the address a mapping hands out or names is a pointer: not a summary argument

    # -- lookups

    def role(self, source: int, op: int) -> EscapeRole | UvmRole | GspRole | None:
        """What an operation is: an RM escape's, a UVM command's or a GSP function's role (OTHER for
        one the tables do not know); None for the sources rmtrace numbers itself (SYS, SEMA, MARK)."""
        if source == Source.RM:
            return self.roles.escapes.get(op, EscapeRole.OTHER)
        if source == Source.UVM:
            return self.roles.uvm.get(op, UvmRole.OTHER)
        if source == Source.GSP:
            return self.roles.gsp.get(op, GspRole.OTHER)
        return None

    def rm_role(self, d: Decoded) -> EscapeRole | GspRole:
        """The role of an RM call (an escape, through IOCTL_XFER_CMD too) or a GSP function
        (``EscapeRole.OTHER`` for any other source)."""
        if d.source == Source.GSP:
            return self.roles.gsp.get(d.op, GspRole.OTHER)
        if d.source == Source.RM:
            return self.roles.escapes.get(d.extra.get("escape", d.op), EscapeRole.OTHER)
        return EscapeRole.OTHER

    @staticmethod
    def class_id(d: Decoded) -> int | None:
        value = d.extra.get("hClass", d.args.get("hClass"))
        return value if isinstance(value, int) else None

    def class_name(self, class_id: int | None) -> str:
        """How a class is named (the decoders' name, ``class 0x...`` for one the profile lacks)."""
        return self._names.class_label(class_id).name

    def locks(self, source: int, op: int) -> tuple[LockKind, ...]:
        """The locks a call of this operation holds while it is in flight (rmtrace.semantics.locks)."""
        role = self.role(source, op)
        return UVM_LOCKS[role] if isinstance(role, UvmRole) else ()

    def engine(self, engine_type: int | None) -> tuple[str | None, int | None]:
        """(engine name, CE rank) of an NV2080 engine type."""
        return self.roles.engine(engine_type)


# --------------------------------------------------------------------------- RM (and the RM calls GSP carries)


def _handle_uses(d: Decoded, client: int, skip: frozenset[str] = HANDLE_USES_SKIP) -> list[Ref]:
    """Every object handle the call names, as uses (none without an RM client)."""
    if not client:
        return []
    return [Ref(RefKind.HANDLE, v, client) for k, v in d.handles.items() if v and k not in skip]


def _rm_alloc(it: Interpreter, call: Call, d: Decoded, out: _Out) -> None:
    h = d.handles
    client, parent, handle = h.get("hClient", 0), h.get("hParent", 0), h.get("hObject", 0)
    class_id = it.class_id(d)
    category = it.roles.category(class_id)
    if category is Category.ROOT:
        root = handle or client
        out.events.append(ev.ObjectAllocated(category, root, root, None, class_id))
        out.defines.append(Ref(RefKind.HANDLE, root, root))
        return
    out.events.append(ev.ObjectAllocated(category, client, handle, parent or None, class_id))
    out.uses.append(Ref(RefKind.HANDLE, parent or client, client))
    out.defines.append(Ref(RefKind.HANDLE, handle, client))
    params = buffer_value(d, Role.ALLOC_PARAMS)
    if category in (Category.CHANNEL, Category.TSG):
        out.uses.extend(_param_handle_uses(d, client, handle))
    event = alloc_params_event(category, client, handle, parent, params)
    if event is not None:
        out.events.append(event)


def alloc_params_event(category: Category, client: int, handle: int, parent: int, params: Any
                       ) -> ev.ChannelAllocated | ev.ChannelGroupAllocated | None:
    """What an allocation's params say beyond the object (``params``: its ALLOC_PARAMS' value): a channel's
    engine and ring, a TSG's engine; None for any other category."""
    if category is Category.CHANNEL:
        userd = field(params, "userdOffset")
        return ev.ChannelAllocated(
            client, handle, parent or None, field(params, "engineType"), field(params, "gpFifoOffset"),
            field(params, "gpFifoEntries"), userd[0] if isinstance(userd, list) and userd else None)
    if category is Category.TSG:
        return ev.ChannelGroupAllocated(client, handle, field(params, "engineType"))
    return None


def _param_handle_uses(d: Decoded, client: int, handle: int) -> list[Ref]:
    """The objects a channel's or channel group's alloc params name (its error notifier, its GPFIFO and
    USERD memory, its context share, its VA space): it needs them to exist, as it needs its parent."""
    found: dict[int, None] = {}
    for b in d.buffers:
        if b.role == Role.ALLOC_PARAMS and b.layout is not None and b.value is not None and hasattr(b.value, "items"):
            found.update(dict.fromkeys(handle_values(b.layout, b.value, b.layouts or {})))
    return [Ref(RefKind.HANDLE, h, client) for h in found if h and h not in (client, handle)]


def _rm_alloc_memory(it: Interpreter, call: Call, d: Decoded, out: _Out) -> None:
    h = d.handles
    client, parent, handle = h.get("hClient", 0), h.get("hParent", 0), h.get("hObject", 0)
    class_id = it.class_id(d)
    out.events.append(ev.ObjectAllocated(it.roles.category(class_id), client, handle, parent or None, class_id))
    out.uses.append(Ref(RefKind.HANDLE, parent or client, client))
    out.defines.append(Ref(RefKind.HANDLE, handle, client))


def _rm_free(it: Interpreter, call: Call, d: Decoded, out: _Out) -> None:
    h = d.handles
    out.events.append(ev.ObjectFreed(h.get("hClient", 0), h.get("hObject", 0)))
    out.uses.extend(_handle_uses(d, h.get("hClient", 0)))


def _rm_dup(it: Interpreter, call: Call, d: Decoded, out: _Out) -> None:
    h = d.handles
    client, parent, handle = h.get("hClient", 0), h.get("hParent", 0), h.get("hObject", 0)
    src_client, src = h.get("hClientSrc", 0), h.get("hObjectSrc", 0)
    out.events.append(ev.ObjectDuplicated(client, handle, parent or None, src_client, src))
    out.uses.append(Ref(RefKind.HANDLE, parent or client, client))
    if src:
        out.uses.append(Ref(RefKind.HANDLE, src, src_client))
    out.defines.append(Ref(RefKind.HANDLE, handle, client))


def _rm_control(it: Interpreter, call: Call, d: Decoded, out: _Out) -> None:
    h = d.handles
    client, handle = h.get("hClient", 0), h.get("hObject", 0)
    cmd = d.extra.get("cmd")
    out.events.append(ev.ControlIssued(client, handle, cmd if isinstance(cmd, int) else None))
    out.uses.extend(_handle_uses(d, client))
    role = it.roles.controls.get(cmd) if isinstance(cmd, int) else None
    if role is None:
        return
    event = control_event(role, client, handle, buffer_value(d, Role.PARAMS))
    if event is not None:
        out.events.append(event)
    if isinstance(event, ev.WorkTokenIssued) and isinstance(event.token, int):
        out.defines.append(Ref(RefKind.TOKEN, event.token, client))


def control_event(role: ControlRole, client: int, handle: int, params: Any
                  ) -> ev.WorkTokenIssued | ev.ChannelBound | ev.ChannelScheduled | None:
    """What a control the model reads did (``params``: its PARAMS' value)."""
    if role is ControlRole.WORK_SUBMIT_TOKEN:
        return ev.WorkTokenIssued(client, handle, field(params, "workSubmitToken"))
    if role is ControlRole.BIND:
        return ev.ChannelBound(client, handle, field(params, "engineType"))
    if role is ControlRole.SCHEDULE:
        return ev.ChannelScheduled(client, handle, bool(field(params, "bEnable")))
    return None


def _rm_other(it: Interpreter, call: Call, d: Decoded, out: _Out) -> None:
    out.uses.extend(_handle_uses(d, d.handles.get("hClient", 0)))


def _linear_address(d: Decoded, after: bool) -> int | None:
    """``pLinearAddress`` of an NVOS33/NVOS34 argument (inside the ``_with_fd`` wrapper where there is one)."""
    arg = buffer_value(d, Role.ARG, after)
    address = field(field(arg, "params"), "pLinearAddress") or field(arg, "pLinearAddress")
    return address if isinstance(address, int) and address else None


def _rm_map(it: Interpreter, call: Call, d: Decoded, out: _Out) -> None:
    """RM_MAP_MEMORY hands out a CPU address (``pLinearAddress``), through the fd it names."""
    _rm_other(it, call, d, out)
    fd = d.args.get("fd")
    if isinstance(fd, int) and fd >= 0:
        out.uses.append(Ref(RefKind.FD, fd))
    address = _linear_address(d, after=True)
    if address is not None:
        out.defines.append(Ref(RefKind.CPU_MAPPING, address))


def _rm_unmap(it: Interpreter, call: Call, d: Decoded, out: _Out) -> None:
    """RM_UNMAP_MEMORY names the CPU address its RM_MAP_MEMORY handed out."""
    _rm_other(it, call, d, out)
    address = _linear_address(d, after=False)
    if address is not None:
        out.uses.append(Ref(RefKind.CPU_MAPPING, address))


def _rm_map_dma(it: Interpreter, call: Call, d: Decoded, out: _Out) -> None:
    """RM_MAP_MEMORY_DMA hands out a GPU virtual address (``dmaOffset``, written back)."""
    _rm_other(it, call, d, out)
    va = d.args.get("dmaOffset")
    if isinstance(va, int) and va:
        out.defines.append(Ref(RefKind.GPU_VA, va, d.handles.get("hClient", 0)))


def _rm_unmap_dma(it: Interpreter, call: Call, d: Decoded, out: _Out) -> None:
    _rm_other(it, call, d, out)
    va = d.args.get("dmaOffset")
    if isinstance(va, int) and va:
        out.uses.append(Ref(RefKind.GPU_VA, va, d.handles.get("hClient", 0)))


MAPPINGS = frozenset({EscapeRole.MAP_MEMORY, EscapeRole.UNMAP_MEMORY})
"""Escapes whose meaning includes a pointer member (decoded only with the buffers)."""

RM_READERS: Mapping[EscapeRole | GspRole, Reader] = {
    EscapeRole.ALLOC: _rm_alloc, GspRole.RM_ALLOC: _rm_alloc,
    EscapeRole.ALLOC_MEMORY: _rm_alloc_memory,
    EscapeRole.FREE: _rm_free, GspRole.FREE: _rm_free,
    EscapeRole.DUP_OBJECT: _rm_dup, GspRole.DUP_OBJECT: _rm_dup,
    EscapeRole.CONTROL: _rm_control, GspRole.RM_CONTROL: _rm_control,
    EscapeRole.MAP_MEMORY: _rm_map,
    EscapeRole.UNMAP_MEMORY: _rm_unmap,
    EscapeRole.MAP_MEMORY_DMA: _rm_map_dma,
    EscapeRole.UNMAP_MEMORY_DMA: _rm_unmap_dma,
}
"""What each RM-carrying role does; every other escape only uses the handles it names."""


def _rm(it: Interpreter, call: Call, d: Decoded, out: _Out) -> None:
    role = it.rm_role(d)
    RM_READERS.get(role, _rm_other)(it, call, d, out)
    _fd_use(call, out)


def _fd_use(call: Call, out: _Out) -> None:
    """An ioctl goes through its fd: it needs the open that made it."""
    fd = call.first.fd
    if fd >= 0:
        out.uses.append(Ref(RefKind.FD, fd))


# --------------------------------------------------------------------------- UVM


def _uuid(d: Decoded) -> bytes:
    """The GPU UUID a UVM call names (its NvProcessorUuid's bytes, flattened into the summary)."""
    value = d.args.get("uuid")
    return bytes(value) if isinstance(value, (bytes, bytearray, list)) else b""


def _uvm(it: Interpreter, call: Call, d: Decoded, out: _Out) -> None:
    role = it.roles.uvm.get(call.first.op, UvmRole.OTHER)
    fd = call.first.fd
    client = d.handles.get("hClient", 0)
    locks = it.locks(Source.UVM, call.first.op)
    out.events.extend(ev.LockTaken(lock) for lock in locks)
    if role is UvmRole.INITIALIZE:
        out.events.append(ev.UvmInitialized(fd))
        out.defines.append(Ref(RefKind.VA_SPACE, fd))
    else:
        if role not in (UvmRole.MM_INITIALIZE, UvmRole.DEINITIALIZE, UvmRole.TOOLS):
            out.events.append(ev.VaSpaceUsed(fd))
            out.uses.append(Ref(RefKind.VA_SPACE, fd))
        out.uses.extend(_handle_uses(d, client, frozenset({"hClass"})))
    channel = d.handles.get("hChannel") or d.args.get("hChannel") or 0
    if role is UvmRole.REGISTER_GPU:
        out.events.append(ev.UvmRegistered(fd, _uuid(d), client))
    elif role is UvmRole.UNREGISTER_GPU:
        out.events.append(ev.UvmUnregistered(fd, _uuid(d)))
    elif role is UvmRole.REGISTER_CHANNEL:
        out.events.append(ev.UvmChannelRegistered(client, channel))
        out.defines.append(Ref(RefKind.UVM_CHANNEL, channel, client))
    elif role is UvmRole.UNREGISTER_CHANNEL:  # undoes that registration: a replay skips it where that was skipped
        out.events.append(ev.UvmChannelUnregistered(client, channel))
        out.uses.append(Ref(RefKind.UVM_CHANNEL, channel, client))
    out.events.extend(ev.LockReleased(lock) for lock in locks)
    _fd_use(call, out)


# --------------------------------------------------------------------------- GSP


def _gsp(it: Interpreter, call: Call, d: Decoded, out: _Out) -> None:
    first = call.first
    role = it.roles.gsp.get(first.op, GspRole.OTHER)
    sequence = d.extra.get("sequence")
    if role is GspRole.INIT_DONE:
        out.events.append(ev.GspSessionStarted())
    if first.phase == Phase.SEND:
        out.events.append(ev.GspRequest(first.op, sequence))
    elif d.status is None:
        out.events.append(ev.GspEvent(first.op))
    if d.status is not None:
        out.events.append(ev.GspReply(first.op, sequence, d.status))
    reader = RM_READERS.get(role)
    if reader is not None:
        reader(it, call, d, out)


# --------------------------------------------------------------------------- the host service (SEMA)


def _rank(args: Mapping[str, Any]) -> int | None:
    rank = args.get("rank")
    return rank if isinstance(rank, int) and rank != NO_RANK else None


def _reason(enum_type: Any, value: Any) -> Any:
    try:
        return enum_type(value)
    except ValueError:
        return value


SEMA_EVENTS: Mapping[int, Callable[[Mapping[str, Any]], Event]] = {
    SemaOp.REGISTER_CHANNEL: lambda a: ev.HostChannelRegistered(a["client"], a["channel"], a["ring_va"],
                                                                a["userd_va"], _rank(a), a["rc"]),
    SemaOp.UNREGISTER_CHANNEL: lambda a: ev.HostChannelUnregistered(a["client"], a["channel"], _rank(a), a["rc"]),
    SemaOp.PUBLISH_RING: lambda a: ev.Published(a["channel"], _rank(a), ev.Publication.RING, a["va"], a["size"],
                                                a["pub_calls"], a["rc"]),
    SemaOp.PUBLISH_USERD: lambda a: ev.Published(a["channel"], _rank(a), ev.Publication.USERD, a["va"], a["size"],
                                                 a["pub_calls"], a["rc"]),
    SemaOp.COMPLETION_HINT: lambda a: ev.SemaHint(a["channel"], _rank(a), a["value"], a["rc"]),
    SemaOp.RELEASE: lambda a: ev.WorkCompleted(a["channel"], _rank(a), a["value"], a["counter"],
                                               ev.Completion.RELEASE, a["rc"]),
    SemaOp.FAKED_COMPLETION: lambda a: ev.WorkCompleted(a["channel"], _rank(a), a["value"], a["counter"],
                                                        ev.Completion.FAKED, a["rc"]),
    SemaOp.ACQUIRE: lambda a: ev.SemaAcquire(a["channel"], _rank(a), a["value"], a["rc"]),
    SemaOp.LATCH_ARM: lambda a: ev.LatchArmed(_rank(a), a["channel"], a["generation"]),
    SemaOp.LATCH_FIRE: lambda a: ev.LatchFired(_rank(a), a["channel"], a["generation"]),
    SemaOp.DRAIN_HOLD: lambda a: ev.DrainHeld(_rank(a), a["channel"], a["held"], _reason(DrainReason, a["reason"])),
    SemaOp.DRAIN_RELEASE: lambda a: ev.DrainReleased(_rank(a), a["channel"], a["held"],
                                                     _reason(DrainReason, a["reason"]), a["held_ns"]),
    SemaOp.SESSION_RESET: lambda a: ev.HostSessionReset(a["old_session"], a["new_session"], a["client"],
                                                        _reason(ResetReason, a["reason"]), a["channels_dropped"],
                                                        a["latches_rearmed"]),
    SemaOp.COUNTERS: lambda a: ev.HostCounters(tuple((k, v) for k, v in a.items()
                                                     if k not in ("vgpu", "session") and isinstance(v, int))),
}
"""Each sema op's event, from the decoded message's members (docs/sema-protocol.md)."""


def _sema(it: Interpreter, call: Call, d: Decoded, out: _Out) -> None:
    make = SEMA_EVENTS.get(call.first.op)
    if make is None or not d.known:
        return
    try:
        out.events.append(make(d.args))
    except KeyError:  # a message whose body lacks a member its op has: shown raw, means nothing
        return


# --------------------------------------------------------------------------- processes and files (SYS), marks


def _sys(it: Interpreter, call: Call, d: Decoded, out: _Out) -> None:
    first, last = call.first, call.last
    op = first.op
    if op == SysOp.OPEN:
        fd = first.fd if first.fd >= 0 else last.ret
        path = d.args.get("path", "")
        out.events.append(ev.FdOpened(fd, path, device_of(path)))
        out.defines.append(Ref(RefKind.FD, fd))
    elif op == SysOp.CLOSE:
        out.events.append(ev.FdClosed(first.fd))
        out.uses.append(Ref(RefKind.FD, first.fd))
    elif op == SysOp.DUP:
        out.events.append(ev.FdDuplicated(first.fd, first.ret))
    elif op == SysOp.MMAP:
        addr = d.args.get("addr", 0)
        out.events.append(ev.MemoryMapped(first.fd, addr, d.args.get("length", 0), d.args.get("offset", 0)))
        if first.fd >= 0:
            out.uses.append(Ref(RefKind.FD, first.fd))
        if addr:
            out.defines.append(Ref(RefKind.CPU_MAPPING, addr))
    elif op == SysOp.MUNMAP:
        addr = d.args.get("addr", 0)
        out.events.append(ev.MemoryUnmapped(addr, d.args.get("length", 0)))
        if addr:
            out.uses.append(Ref(RefKind.CPU_MAPPING, addr))
    elif op == SysOp.FORK:
        if first.ret > 0:
            out.events.append(ev.ProcessForked(first.ret))
    elif op == SysOp.EXEC:
        argv = d.args.get("argv")
        if argv is not None:
            out.events.append(ev.ProcessExecuted(tuple(argv)))
    elif op == SysOp.EXIT:
        out.events.append(ev.ProcessExited(first.ret))


def _json(d: Decoded) -> dict[str, Any]:
    data = d.args.get("data")
    return data if isinstance(data, dict) else {}


def _mark(it: Interpreter, call: Call, d: Decoded, out: _Out) -> None:
    rec: Record = call.first
    op = rec.op
    if op == MarkOp.STOP:
        data = d.args.get("data")
        out.events.append(ev.RecordingStopped(data if isinstance(data, dict) else {"text": d.args.get("text")}))
    elif op == MarkOp.LOST:
        out.events.append(ev.RecordsLost(_json(d)))
    elif op == MarkOp.IN_FLIGHT:
        out.events.append(ev.CallInFlightAtStop(rec.pid, rec.tid, rec.call_id))
    elif op == MarkOp.VERDICT:
        out.events.append(ev.ReplayVerdict(_json(d)))


READERS: Mapping[int, Reader] = {
    Source.RM: _rm,
    Source.UVM: _uvm,
    Source.GSP: _gsp,
    Source.SEMA: _sema,
    Source.SYS: _sys,
    Source.MARK: _mark,
}
"""One reader per record source, by the source of the call's first record."""

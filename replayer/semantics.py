"""From calls to messages: the one place the replayer turns a call's meaning into what it sends.

A call (an ioctl's enter and exit, a system record, a GSP request and its
response, an event) is interpreted once, at plan time, by the semantic layer
(``rmtrace.semantics``), and its events become a :class:`~rmtrace.replayer.messages.Message`:
the model's :class:`~rmtrace.replayer.messages.Kind`, the handles, file, class
category, ring address or GPU it concerns, the locks it takes, what it expects
back, and which values (handles, files, VA spaces) it uses and defines, for
dependencies.  Everything here is a table over event types; no decoder name is
read.

``rewrite`` is the way back: it changes fields of a record's buffers (a
handle, a ring address, a status) with the same construct definitions the
decoders parse with, so cloned streams and answers that differ from the
recording are well-formed records in the output trace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from rmtrace.decoders import Decoded, DecoderSet, Level
from rmtrace.decoders.context import context
from rmtrace.decoders.parse import HANDLE_ALIASES, HANDLE_TYPES, STATUS_FIELDS, thaw
from rmtrace.decoders.profiles import DriverProfile
from rmtrace.replayer.messages import Expect, Kind, Message

from rmtrace.calls import Call, CallState
from rmtrace.record import Phase, Record, Role, Source, When, decode_record, encode_record
from rmtrace.semantics import CallMeaning, Category, GspRole, Interpreter
from rmtrace.semantics import events as ev

KINDS: tuple[tuple[type[ev.Event], Kind], ...] = (
    (ev.WorkTokenIssued, Kind.WORK_TOKEN),
    (ev.ControlIssued, Kind.RM_CONTROL),
    (ev.ObjectAllocated, Kind.RM_ALLOC),
    (ev.ObjectFreed, Kind.RM_FREE),
    (ev.UvmInitialized, Kind.UVM_INITIALIZE),
    (ev.UvmRegistered, Kind.UVM_REGISTER_GPU),
    (ev.UvmUnregistered, Kind.UVM_UNREGISTER_GPU),
    (ev.VaSpaceUsed, Kind.UVM_CALL),
    (ev.FdOpened, Kind.SYS_OPEN),
    (ev.FdClosed, Kind.SYS_CLOSE),
    (ev.ProcessExited, Kind.SYS_EXIT),
    (ev.GspSessionStarted, Kind.GSP_INIT),
)
"""The model's kind of a message: the first of its call's events this table lists (a work-token
control is a control too, a registration a UVM call too); a call with none of them is PASS."""

OUTPUTS: Mapping[type[ev.Event], Callable[[Any], tuple[tuple[str, Any], ...]]] = {
    ev.WorkTokenIssued: lambda e: (("workSubmitToken", e.token),) if e.token is not None else (),
}
"""Output params members that matter (compared where a target answers them), by event."""

GPFIFO_ENTRY_SIZE = 8
DEFAULT_GPFIFO_ENTRIES = 1024
STAND_IN_RING_BASE = 0x7E0000000000
STAND_IN_HANDLE_MASK = 0xFFFFF
"""Ring address stand-in when a capture has no alloc params: base + (handle's low bits << 16)."""
REPLY_PHASES: Mapping[int, int] = {Phase.ENTER: Phase.EXIT, Phase.SEND: Phase.RECV}
GSP_RM_CALLS = frozenset({GspRole.RM_ALLOC, GspRole.RM_CONTROL, GspRole.FREE})
"""GSP RPCs the model handles as the RM calls they carry (their handles are the message's)."""


def kind_of(meaning: CallMeaning) -> Kind:
    for event_type, kind in KINDS:
        found = meaning.first(event_type)
        if found is not None:
            return Kind.RM_CLIENT if kind is Kind.RM_ALLOC and found.category is Category.ROOT else kind
    return Kind.PASS


class Semantics:
    """Turns the calls of one trace into messages, with that trace's decoders."""

    def __init__(self, decoders: DecoderSet) -> None:
        self.decoders = decoders
        self.profile: DriverProfile = decoders.profile
        self.interpreter = Interpreter(decoders)
        self._ctx = context(decoders.profile)

    # -- statuses

    def status_code(self, name: str) -> int:
        code = self.profile.lookup("status", name)
        if code is None:
            raise KeyError(f"the profile of driver {self.profile.version} has no status {name}")
        return code

    def status_name(self, code: int | None) -> str:
        return "none" if code is None else str(self._ctx.names.status(code))

    # -- calls to messages

    def message(self, call: Call, index: int) -> Message:
        """The message for one call of a client (its position ``index`` in the client's stream)."""
        meaning = self.interpreter.interpret(call)
        decoded = meaning.decoded
        records = call.records
        first = records[0]
        reply = next((r for r in records[1:] if r.phase in (Phase.EXIT, Phase.RECV)), None)
        expect = self._expect(first, reply, decoded, call.state)
        if expect.response:
            fields = tuple(f for e in meaning.events if type(e) in OUTPUTS for f in OUTPUTS[type(e)](e))
            if fields:
                expect = replace(expect, fields=fields)
        msg = Message(index=index, kind=kind_of(meaning), name=decoded.full_name, seq=first.seq,
                      request=encode_record(first), reply=encode_record(reply) if reply is not None else None,
                      expect=expect, pid=first.pid, tid=first.tid, call_id=first.call_id, fd=first.fd,
                      dur_ns=(reply.time_ns - first.time_ns) if reply is not None else 0,
                      uses=meaning.uses, defines=meaning.defines,
                      locks=tuple(e.lock for e in meaning.events if isinstance(e, ev.LockTaken)))
        h = decoded.handles
        if first.source == Source.RM or self.interpreter.rm_role(decoded) in GSP_RM_CALLS:
            msg.h_client, msg.h_parent, msg.h_object = h.get("hClient", 0), h.get("hParent", 0), h.get("hObject", 0)
        elif first.source == Source.UVM:
            msg.h_client = h.get("hClient", 0)
        for event in meaning.events:
            fill = FACTS.get(type(event))
            if fill is not None:
                fill(msg, event)
        return msg

    def _expect(self, first: Record, reply: Record | None, decoded: Decoded, state: CallState) -> Expect:
        if reply is None:
            lone = first.phase in (Phase.EVENT, Phase.RECV) or (first.source == Source.SYS and state is CallState.SINGLE)
            return Expect(False) if lone else Expect(None)
        return Expect(True, decoded.status, decoded.status_name, reply.ret, reply.err)

    # -- writing records back

    def rewrite(self, record: Record, change: Callable[[Member, Any], Any]) -> Record:
        """``record`` with every decoded member passed through ``change(member, value) -> value``.

        Only buffers a layout decodes are rewritten (with the same definitions);
        others are kept byte for byte.
        """
        decoded = self.decoders.decode(record, Level.FULL)
        targets = {(b.role, b.when, b.slot): b for b in decoded.buffers if b.layout is not None and b.value is not None}
        out = []
        for buf in record.buffers:
            parsed = targets.get((buf.role, buf.when, buf.slot))
            if parsed is None or parsed.data != buf.data:  # only buffers a layout covers from their start
                out.append(buf)
                continue
            value = thaw(parsed.value)  # parsed values are shared and frozen: this one is changed
            changed = _change_members(parsed.layout, value, change, self._ctx.defs.layouts)
            if not changed:
                out.append(buf)
                continue
            data = self._ctx.defs.struct(parsed.layout.name).build(value)
            out.append(replace(buf, data=data + buf.data[len(data):]))
        return replace(record, buffers=tuple(out))

    def with_status(self, record: Record, status: int) -> Record:
        """A reply record whose NV_STATUS says ``status``."""
        return self.rewrite(record, lambda member, value: status if member.name in STATUS_FIELDS else value)

    def answer(self, data: bytes, status: int | None = None) -> bytes:
        """A reply record: ``data`` is the recorded reply (or, when the recording has none, the
        request, turned into its reply); with ``status``, saying that status."""
        record = decode_record(data)
        reply_phase = REPLY_PHASES.get(record.phase)
        if reply_phase is not None:
            record = replace(record, phase=reply_phase, buffers=tuple(
                replace(b, when=When.AFTER) if b.when == When.BEFORE else b for b in record.buffers))
        if status is not None:
            record = self.with_status(record, status)
        return record.encode()

    def reply_status(self, request: bytes, reply: bytes) -> tuple[int | None, int, int, dict[str, Any]]:
        """(status, ret, errno, output params) of a reply record, decoded afresh with its request."""
        enter, exit_ = decode_record(request), decode_record(reply)
        call = Call((enter, exit_), CallState.COMPLETE)
        decoded = self.decoders.decode(call, Level.FULL)
        after = next((b.value for b in decoded.buffers if b.role == Role.PARAMS and b.when == When.AFTER
                      and b.value is not None), None)
        fields = {k: v for k, v in after.items() if not k.startswith("_")} if after is not None else {}
        return decoded.status, exit_.ret, exit_.err, fields


@dataclass(frozen=True)
class Member:
    """A struct member as ``Semantics.rewrite`` hands it over: its name, and whether it is an RM handle."""

    name: str
    """The member's name; a handle's under the name rmtrace shows (hRoot is hClient, ...)."""
    handle: bool
    """Its C type is NvHandle (the layout's fact, not a guess from the name)."""


def _change_members(layout: Any, value: Any, change: Callable[[Member, Any], Any], layouts: Mapping[str, Any]) -> bool:
    """Apply ``change`` to the top-level members of a parsed struct (walking into nested structs)."""
    changed = False
    for f in layout.fields:
        if f.name not in value:
            continue
        inner = layouts.get(f.type) if f.kind == "struct" else None
        if inner is not None and hasattr(value[f.name], "items"):
            changed |= _change_members(inner, value[f.name], change, layouts)
            continue
        handle = f.type in HANDLE_TYPES
        new = change(Member(HANDLE_ALIASES.get(f.name, f.name) if handle else f.name, handle), value[f.name])
        if new != value[f.name]:
            value[f.name] = new
            changed = True
    return changed


def _allocated(msg: Message, e: ev.ObjectAllocated) -> None:
    msg.category = e.category
    if e.category is Category.ROOT:
        msg.h_client = e.h_client


def _channel(msg: Message, e: ev.ChannelAllocated) -> None:
    """The channel's ring (and USERD) address from its alloc params, or a stand-in when the capture
    lacks them: an address derived from the channel handle, which is as stable across runs of one
    program as the real ring address is."""
    msg.ring_size = (e.ring_entries or DEFAULT_GPFIFO_ENTRIES) * GPFIFO_ENTRY_SIZE
    msg.ring_va = e.ring_va or STAND_IN_RING_BASE + ((msg.h_object & STAND_IN_HANDLE_MASK) << 16)
    msg.userd_va = e.userd_va or msg.ring_va + msg.ring_size


def _gpu(msg: Message, e: ev.UvmRegistered | ev.UvmUnregistered) -> None:
    msg.gpu = e.gpu


def _opened(msg: Message, e: ev.FdOpened) -> None:
    msg.fd = e.fd


FACTS: Mapping[type[ev.Event], Callable[[Message, Any], None]] = {
    ev.ObjectAllocated: _allocated,
    ev.ChannelAllocated: _channel,
    ev.UvmRegistered: _gpu,
    ev.UvmUnregistered: _gpu,
    ev.FdOpened: _opened,
}
"""What each event tells the model beyond the message's kind."""

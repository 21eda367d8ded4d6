"""From decoded calls to messages: the one place the replayer reads decoder output.

A call (an ioctl's enter and exit, a system record, a GSP request and its
response, an event) is decoded once, at plan time, and reduced to what a
replay needs: the model's :class:`~rmtrace.replayer.messages.Kind` and the
handles, file, class category, ring address or GPU it concerns; what it
expects back; which keys (handles, files) it uses and defines, for
dependencies.  Everything here is tables over decoder names; names and
numbers come from the trace's driver profile through the decoders.

``rewrite`` is the way back: it changes fields of a record's buffers (a
handle, a ring address, a status) with the same construct definitions the
decoders parse with, so cloned streams and answers that differ from the
recording are well-formed records in the output trace.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from rmtrace.decoders import Decoded, DecoderSet, Level
from rmtrace.decoders.context import context
from rmtrace.decoders.parse import HANDLE_ALIASES, HANDLE_TYPES, STATUS_FIELDS
from rmtrace.decoders.roles import roles
from rmtrace.replayer.messages import Expect, Kind, Message
from rmtrace.replayer.model.objects import Category

from rmtrace.calls import Call, CallState
from rmtrace.record import Phase, Record, Role, Source, SysOp, When, decode_record, encode_record

CLASS_CATEGORIES: tuple[tuple[re.Pattern, Category], ...] = tuple((re.compile(p), c) for p, c in (
    (r"^NV0?1_ROOT", Category.ROOT),
    (r"^NV01_DEVICE_0$", Category.DEVICE),
    (r"^NV20_SUBDEVICE_0$", Category.SUBDEVICE),
    (r"_VASPACE_", Category.VASPACE),
    (r"_CHANNEL_GROUP_", Category.TSG),
    (r"_CHANNEL_GPFIFO_", Category.CHANNEL),
    (r"_DMA_COPY_", Category.CE),
    (r"_COMPUTE_", Category.COMPUTE),
    (r"MEMORY", Category.MEMORY),
))
"""RM class name -> what the model needs to know about it; first match wins."""

CONTROL_KINDS: tuple[tuple[re.Pattern, Kind], ...] = (
    (re.compile(r"_GPFIFO_GET_WORK_SUBMIT_TOKEN$"), Kind.WORK_TOKEN),
)
"""Control command name -> kind; every other control is a plain RM_CONTROL."""

OUTPUT_FIELDS: tuple[tuple[re.Pattern, tuple[str, ...]], ...] = (
    (re.compile(r"_GPFIFO_GET_WORK_SUBMIT_TOKEN$"), ("workSubmitToken",)),
)
"""Control command name -> output params fields that matter (compared where a target answers them)."""

UVM_KINDS: Mapping[str, Kind] = {
    "UVM_INITIALIZE": Kind.UVM_INITIALIZE,
    "UVM_MM_INITIALIZE": Kind.PASS,
    "UVM_DEINITIALIZE": Kind.PASS,
    "UVM_REGISTER_GPU": Kind.UVM_REGISTER_GPU,
    "UVM_UNREGISTER_GPU": Kind.UVM_UNREGISTER_GPU,
}
"""UVM commands with their own kind; the rest need an initialized fd (UVM's init check), except tools."""
UVM_TOOLS_PREFIX = "UVM_TOOLS_"

SYS_KINDS: Mapping[int, Kind] = {SysOp.OPEN: Kind.SYS_OPEN, SysOp.CLOSE: Kind.SYS_CLOSE, SysOp.EXIT: Kind.SYS_EXIT}

GSP_KINDS: Mapping[str, Kind] = {
    "GSP_RM_ALLOC": Kind.RM_ALLOC,
    "GSP_RM_CONTROL": Kind.RM_CONTROL,
    "GSP_FREE": Kind.RM_FREE,
    "GSP_INIT_DONE": Kind.GSP_INIT,
}
"""GSP functions and events the model understands (GSP-level traces)."""

GPFIFO_ENTRY_SIZE = 8
DEFAULT_GPFIFO_ENTRIES = 1024
STAND_IN_RING_BASE = 0x7E0000000000
STAND_IN_HANDLE_MASK = 0xFFFFF
"""Ring address stand-in when a capture has no alloc params: base + (handle's low bits << 16)."""
REPLY_PHASES: Mapping[int, int] = {Phase.ENTER: Phase.EXIT, Phase.SEND: Phase.RECV}


def _first(table: Iterable[tuple[re.Pattern, Any]], text: str | None, default: Any) -> Any:
    """The value of the first pattern in ``table`` that ``text`` matches."""
    if text:
        for pattern, value in table:
            if pattern.search(text):
                return value
    return default


def category_of(class_name: str | None) -> Category:
    return _first(CLASS_CATEGORIES, class_name, Category.OTHER)


class Semantics:
    """Turns the calls of one trace into messages, with that trace's decoders."""

    def __init__(self, decoders: DecoderSet) -> None:
        self.decoders = decoders
        self.profile = decoders.profile
        self._ctx = context(decoders.profile)

    # -- statuses

    def status_code(self, name: str) -> int:
        code = self.profile.lookup("status", name)
        if code is None:
            raise KeyError(f"the profile of driver {self.profile.version} has no status {name}")
        return code

    def status_name(self, code: int | None) -> str:
        return "none" if code is None else self._ctx.names.status(code)

    # -- calls to messages

    def message(self, call: Call, index: int) -> Message:
        """The message for one call of a client (its position ``index`` in the client's stream)."""
        records = call.records
        first = records[0]
        decoded = self.decoders.decode(call, Level.CALL)
        reply = next((r for r in records[1:] if r.phase in (Phase.EXIT, Phase.RECV)), None)
        msg = Message(index=index, kind=Kind.PASS, name=decoded.full_name, seq=first.seq,
                      request=encode_record(first), reply=encode_record(reply) if reply is not None else None,
                      expect=self._expect(first, reply, decoded, call.state), pid=first.pid, tid=first.tid,
                      call_id=first.call_id, fd=first.fd,
                      dur_ns=(reply.time_ns - first.time_ns) if reply is not None else 0)
        reader = READERS.get(first.source)
        if reader is not None:
            reader(self, msg, call, decoded)
        if msg.fd >= 0 and first.source in (Source.RM, Source.UVM):
            msg.uses = msg.uses + (("fd", msg.fd),)
        return msg

    def _expect(self, first: Record, reply: Record | None, decoded: Decoded, state: CallState) -> Expect:
        if reply is None:
            lone = first.phase in (Phase.EVENT, Phase.RECV) or (first.source == Source.SYS and state is CallState.SINGLE)
            return Expect(False) if lone else Expect(None)
        return Expect(True, decoded.status, decoded.status_name, reply.ret, reply.err)

    # -- per source

    def _rm(self, msg: Message, call: Call, d: Decoded) -> None:
        h = d.handles
        client = h.get("hClient", 0)
        msg.h_client, msg.h_parent, msg.h_object = client, h.get("hParent", 0), h.get("hObject", 0)
        if d.name == "RM_ALLOC_MEMORY":  # NVOS02: an object like RM_ALLOC's, its class a number
            msg.category = roles(self.profile).category(d.args.get("hClass"))
            msg.kind = Kind.RM_ALLOC
            msg.uses = (("h", client, msg.h_parent or client),)
            msg.defines = (("h", client, msg.h_object),)
            return
        if d.name in ("RM_ALLOC", "GSP_RM_ALLOC"):
            msg.category = category_of(d.detail)
            if msg.category == Category.ROOT:
                msg.kind = Kind.RM_CLIENT
                msg.h_client = msg.h_object or client
                msg.defines = (("h", msg.h_client, msg.h_client),)
                return
            msg.kind = Kind.RM_ALLOC
            msg.uses = (("h", client, msg.h_parent or client),)
            msg.defines = (("h", client, msg.h_object),)
            if msg.category == Category.CHANNEL:
                self._channel_params(msg, call)
            return
        if d.name in ("RM_FREE", "GSP_FREE"):
            msg.kind = Kind.RM_FREE
        elif d.name in ("RM_CONTROL", "GSP_RM_CONTROL"):
            msg.kind = _first(CONTROL_KINDS, d.detail, Kind.RM_CONTROL)
            fields = _first(OUTPUT_FIELDS, d.detail, ())
            if fields and msg.expect.response:
                msg.expect = replace(msg.expect, fields=self._outputs(call, fields))
        msg.uses = tuple(("h", client, v) for k, v in h.items() if v and k not in ("hClass", "hParent")) \
            if client else ()

    def _channel_params(self, msg: Message, call: Call) -> None:
        """The channel's ring (and USERD) address from its alloc params, or a stand-in when the
        capture lacks them: an address derived from the channel handle, which is as stable across
        runs of one program as the real ring address is."""
        full = self.decoders.decode(call, Level.FULL)
        params = next((b.value for b in full.buffers if b.role == Role.ALLOC_PARAMS and b.value is not None), None)
        params = params or {}
        msg.ring_size = (params.get("gpFifoEntries") or DEFAULT_GPFIFO_ENTRIES) * GPFIFO_ENTRY_SIZE
        msg.ring_va = params.get("gpFifoOffset") or STAND_IN_RING_BASE + ((msg.h_object & STAND_IN_HANDLE_MASK) << 16)
        userd = params.get("userdOffset") or [0]
        msg.userd_va = userd[0] or msg.ring_va + msg.ring_size

    def _outputs(self, call: Call, names: tuple[str, ...]) -> tuple[tuple[str, Any], ...]:
        full = self.decoders.decode(call, Level.FULL)
        after = next((b.value for b in full.buffers if b.role == Role.PARAMS and b.when == When.AFTER
                      and b.value is not None), None)
        return tuple((n, after[n]) for n in names if after is not None and n in after)

    def _uvm(self, msg: Message, call: Call, d: Decoded) -> None:
        name = d.name
        kind = UVM_KINDS.get(name)
        if kind is None:
            kind = Kind.PASS if name.startswith(UVM_TOOLS_PREFIX) else Kind.UVM_CALL
        msg.kind = kind
        if kind in (Kind.UVM_REGISTER_GPU, Kind.UVM_UNREGISTER_GPU):
            msg.gpu = bytes(d.args.get("uuid", b""))
        client = d.handles.get("hClient", 0)
        msg.h_client = client
        va = ("va", msg.fd)
        if kind == Kind.UVM_INITIALIZE:
            msg.defines = (va,)
            return
        uses = [va] if kind != Kind.PASS else []
        uses += [("h", client, v) for k, v in d.handles.items() if v and k != "hClass"]
        msg.uses = tuple(uses)

    def _sys(self, msg: Message, call: Call, d: Decoded) -> None:
        first = call.records[0]
        msg.kind = SYS_KINDS.get(first.op, Kind.PASS)
        last = call.records[-1]
        if first.op == SysOp.OPEN:
            msg.fd = first.fd if first.fd >= 0 else last.ret
            msg.defines = (("fd", msg.fd),)
        elif first.op == SysOp.CLOSE:
            msg.uses = (("fd", first.fd),)

    def _gsp(self, msg: Message, call: Call, d: Decoded) -> None:
        kind = GSP_KINDS.get(d.name, Kind.PASS)
        if kind in (Kind.RM_ALLOC, Kind.RM_CONTROL, Kind.RM_FREE):
            self._rm(msg, call, d)
        else:
            msg.kind = kind

    # -- writing records back

    def rewrite(self, record: Record, change: Callable[[str, Any], Any]) -> Record:
        """``record`` with every decoded member passed through ``change(name, value) -> value``.

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
            value = parsed.value
            changed = _change_members(parsed.layout, value, change, self._ctx.defs.layouts)
            if not changed:
                out.append(buf)
                continue
            data = self._ctx.defs.struct(parsed.layout.name).build(value)
            out.append(replace(buf, data=data + buf.data[len(data):]))
        return replace(record, buffers=tuple(out))

    def with_status(self, record: Record, status: int) -> Record:
        """A reply record whose NV_STATUS says ``status``."""
        return self.rewrite(record, lambda name, value: status if name in STATUS_FIELDS else value)

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


def _change_members(layout: Any, value: Any, change: Callable[[str, Any], Any], layouts: Mapping[str, Any]) -> bool:
    """Apply ``change`` to the top-level members of a parsed struct (walking into nested structs)."""
    changed = False
    for f in layout.fields:
        if f.name not in value:
            continue
        inner = layouts.get(f.type) if f.kind == "struct" else None
        if inner is not None and hasattr(value[f.name], "items"):
            changed |= _change_members(inner, value[f.name], change, layouts)
            continue
        name = HANDLE_ALIASES.get(f.name, f.name) if f.type in HANDLE_TYPES else f.name
        new = change(name, value[f.name])
        if new != value[f.name]:
            value[f.name] = new
            changed = True
    return changed


READERS: Mapping[int, Callable[[Semantics, Message, Call, Decoded], None]] = {
    Source.RM: Semantics._rm,
    Source.UVM: Semantics._uvm,
    Source.SYS: Semantics._sys,
    Source.GSP: Semantics._gsp,
}
"""Which reader fills a message's facts, by the source of its first record."""

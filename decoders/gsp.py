"""GSP RPC messages (source GSP): queue elements, RPC headers, payloads, chains and pairing.

docs/gsp-records.md defines the records: op = the RPC function or event
number, phase SEND (CPU-RM -> GSP command queue) or RECV (status queue:
responses and events), buffer PAYLOAD = the RPC message (header + payload,
``length`` bytes), optional buffer ARG = the 48-byte queue element prefix
(checksum, queue sequence, element count), fd = the GSP channel (GPU
instance), pid/tid/call_id = the guest call the RPC serves (0 if none).

Everything version-dependent comes from the profile: the header and payload
layouts (``gsp_payloads``: rpc_gsp_rm_control is 24 bytes up to 570 and 40
from 575, and nothing here knows that), the function and event numbers, and
the constants (signature, header version, element and prefix sizes, the
largest RPC).  What is stable is named here, as data:

* ``PAYLOAD_PARAMS``: payloads that carry RM params, decoded by the same
  control/alloc decoders as the ioctls (``rmparams``);
* ``CHAIN_TOTAL``: payload members that give a large RPC's full size, so a
  CONTINUATION_RECORD chain is known to be complete;
* ``DETAIL``: the payload member that names a call at the name level.

Pairing (``GspPairing``, scapy's hashret/answers): a request opens the call
(fd, function, sequence); the status-queue message with the same function
and sequence answers it; everything else on the status queue is an event.
A request larger than ``max_rpc_size`` goes as its first record plus
CONTINUATION_RECORD records with the next sequences, and a large reply comes
back the same way; the parts fold into the call.
"""

from __future__ import annotations

import struct
import weakref
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from construct import Rebuild, Struct
from rmtrace.decoders.base import Decoded, DecodedBuffer, Label, Level, Op, bind_source
from rmtrace.decoders.context import Context, context
from rmtrace.decoders.ioctl import summary_args
from rmtrace.decoders.names import gsp_name, short_name
from rmtrace.decoders.parse import handles_of, parse_buffer, peek, status_of
from rmtrace.decoders.profiles.model import DriverProfile
from rmtrace.decoders.rmparams import alloc_params, control_params

from rmtrace.calls import PairAction, Pairing
from rmtrace.errors import RmtraceError
from rmtrace.record import Buffer, Phase, Record, Role, Source, When, enum_name

ELEMENT_LAYOUT = "GSP_MSG_QUEUE_ELEMENT"
ELEMENT_RPC_MEMBER = "rpc"
CONTINUATION = "CONTINUATION_RECORD"
PAYLOAD_MEMBER = "rpc_message_data"

RPC_FLAG_MEMBERS = ("rmapiRpcFlags", "flags")
"""Payload members that carry RMAPI_RPC_FLAGS (the name differs between layouts)."""
RPC_FLAG_SERIALIZED = 0x2
"""RMAPI_RPC_FLAGS_SERIALIZED: the params are FINN-serialized, not the C struct."""


@dataclass(frozen=True)
class ParamsRule:
    """A payload that carries RM params: the member naming them, and their decoder."""

    key: str      # payload member: the control command or the class
    decoder: Any  # rmparams.control_params or rmparams.alloc_params
    role: int     # the role the params get when shown (as in the ioctl)


PAYLOAD_PARAMS = {
    "GSP_RM_CONTROL": ParamsRule("cmd", control_params, Role.PARAMS),
    "GSP_RM_ALLOC": ParamsRule("hClass", alloc_params, Role.ALLOC_PARAMS),
}
"""RPC functions whose payload ends in RM params, decoded as the ioctls' are."""

DETAIL = {"GSP_RM_CONTROL": ("cmd", "control"), "GSP_RM_ALLOC": ("hClass", "class")}
"""RPC functions named at the name level by a payload member (peeked, never parsed)."""

CHAIN_TOTAL = {"GSP_RM_CONTROL": "paramsSize", "GSP_RM_ALLOC": "paramsSize"}
"""Payload members giving the params' size, hence a chained RPC's full length."""


def checksum(data: bytes) -> int:
    """GSP's queue checksum: XOR of the little-endian 64-bit words, folded to 32 bits.

    The element's ``checkSum`` is chosen so this is 0 over prefix + message
    (zero padded to 8 bytes); a reader checks for 0.
    """
    pad = (-len(data)) % 8
    words = struct.unpack(f"<{(len(data) + pad) // 8}Q", data + bytes(pad))
    x = 0
    for w in words:
        x ^= w
    return (x >> 32) ^ (x & 0xFFFFFFFF)


@dataclass
class Part:
    """One GSP record, parsed: its header, its slice of payload, its queue prefix."""

    record: Record
    header: Any = None          # the RPC header Container (None when unreadable)
    payload: bytes = b""        # bytes after the header
    prefix: Any = None          # queue element prefix Container, if the record has one
    notes: list[str] = field(default_factory=list)
    buffers: list[DecodedBuffer] = field(default_factory=list)

    @property
    def function(self) -> int:
        return self.header.function if self.header is not None else self.record.op

    @property
    def sequence(self) -> int | None:
        return self.header.sequence if self.header is not None else None


class GspCodec:
    """The GSP definitions of one profile: parse and build messages and queue elements."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        profile = ctx.profile
        defs = ctx.defs
        self.constants = profile.constants
        element = defs.layout(ELEMENT_LAYOUT)
        header_name = element.field(ELEMENT_RPC_MEMBER).type if element is not None else None
        header_layout = defs.layout(header_name) if header_name else None
        if element is None or header_name is None or header_layout is None:
            raise RmtraceError(f"profile {profile.version} has no GSP RPC header layout")
        self.header_name: str = header_name
        self.header_layout = header_layout
        self.header_size = self.header_layout.size
        self.message = defs.struct(self.header_name)
        self.prefix_size = element.field(ELEMENT_RPC_MEMBER).offset
        rpc = element.field(ELEMENT_RPC_MEMBER)
        self.prefix = Struct(*defs.struct(ELEMENT_LAYOUT, flex=False).subcons[:_index_of(element, rpc.name, defs)])
        self.element = defs.variant(ELEMENT_LAYOUT, {
            "checkSum": lambda sub: Rebuild(sub, self._element_checksum),
            "elemCount": lambda sub: Rebuild(sub, self._element_count),
            ELEMENT_RPC_MEMBER: lambda sub: self.message,
        })
        self._element_plain = defs.variant(ELEMENT_LAYOUT, {ELEMENT_RPC_MEMBER: lambda sub: self.message})
        names = {**profile.gsp_functions, **profile.gsp_events}
        self.by_name = {short_name(n): num for num, n in names.items()}
        self.continuation = self.by_name.get(CONTINUATION)
        self.max_rpc = self.constants.get("max_rpc_size")
        self.element_size = self.constants.get("msgq_element_size")
        self.function = peek(defs.layouts, self.header_name, "function")
        self.sequence = peek(defs.layouts, self.header_name, "sequence")
        self.length = peek(defs.layouts, self.header_name, "length")

    # -- building (the replayer's reference model and the tests use these) -----------------

    def payload(self, function: int, values: Mapping[str, Any]) -> bytes:
        """A payload of ``function``'s layout: unnamed members zero, ``values`` over them."""
        return self.ctx.defs.build_values(self.ctx.profile.gsp_payloads[function], values)

    def build(self, function: int, payload: bytes, sequence: int = 0, *, rpc_result: int = 0xFFFFFFFF,
              rpc_result_private: int = 0xFFFFFFFF, spare: int = 0) -> bytes:
        """One RPC message (header + payload) as CPU-RM writes it."""
        return self.message.build({
            "header_version": self.constants["rpc_header_version"], "signature": self.constants["rpc_signature"],
            "function": function, "rpc_result": rpc_result, "rpc_result_private": rpc_result_private,
            "sequence": sequence, "u": {"spare": spare}, PAYLOAD_MEMBER: payload,
        })

    def element_prefix(self, message: bytes, seq_num: int) -> bytes:
        """The 48-byte queue element prefix for ``message`` (checksum and element count rebuilt)."""
        rpc = self.message.parse(message)
        whole = self.element.build({"authTagBuffer": bytes(16), "aadBuffer": bytes(16), "seqNum": seq_num,
                                    ELEMENT_RPC_MEMBER: rpc})
        return whole[:self.prefix_size]

    def split(self, function: int, payload: bytes, first_sequence: int) -> list[bytes]:
        """The messages of one RPC as ``_issueRpcLarge`` sends it: first record, then continuations.

        The first record carries up to ``max_rpc_size`` bytes of header + payload;
        each continuation carries the next ``max_rpc_size - header`` payload bytes
        with its own header, function CONTINUATION_RECORD, the next sequence.
        """
        room = self.max_rpc - self.header_size
        first, rest = payload[:room], payload[room:]
        out = [self.build(function, first, first_sequence)]
        seq = first_sequence
        while rest:
            seq += 1
            chunk, rest = rest[:room], rest[room:]
            if self.continuation is None:
                raise RmtraceError(f"profile {self.ctx.profile.version} has no {CONTINUATION}: an RPC of "
                                   f"{len(payload)} bytes cannot be split")
            out.append(self.build(self.continuation, chunk, seq))
        return out

    def _element_checksum(self, ctx: Any) -> int:
        values = {k: v for k, v in ctx.items() if not k.startswith("_")}
        values.update(checkSum=0, elemCount=self._element_count(ctx))
        return checksum(self._element_plain.build(values)[:self.prefix_size + _rpc_length(self, ctx)])

    def _element_count(self, ctx: Any) -> int:
        total = self.prefix_size + _rpc_length(self, ctx)
        return -(-total // self.element_size)

    # -- parsing ---------------------------------------------------------------------------

    def part(self, record: Record, level: Level) -> Part:
        """Header, payload slice and prefix of one record; problems become notes."""
        part = Part(record)
        buf = record.buffer(Role.PAYLOAD)
        if buf is None:
            part.notes.append("no PAYLOAD buffer")
            return part
        parsed = parse_buffer(self.ctx.defs, self.header_name, buf, title="RPC message")
        if parsed.value is None:
            part.notes.append(parsed.note or "RPC header not decoded")
            part.buffers.append(parsed)
            return part
        header = parsed.value
        part.header = header
        part.payload = header.get(PAYLOAD_MEMBER, buf.data[self.header_size:])
        if parsed.note:
            part.payload = buf.data[self.header_size:]
            part.notes.append(f"length {header.length} but {len(buf.data)} bytes in the record")
        self._check_header(part)
        if level >= Level.FULL:
            shown = {k: v for k, v in header.items() if k != PAYLOAD_MEMBER}
            title = f"{enum_name(Phase, record.phase)} {self.header_name} (sequence {header.sequence})"
            part.buffers.append(DecodedBuffer(buf.role, buf.when, buf.slot, buf.data[:self.header_size],
                                              self.header_layout, shown, title=title, layouts=self.ctx.defs.layouts))
        prefix = record.buffer(Role.ARG)
        if prefix is not None:
            self._check_prefix(part, prefix, buf.data, level)
        return part

    def _check_header(self, part: Part) -> None:
        expect = (("signature", "rpc_signature"), ("header_version", "rpc_header_version"))
        for member, constant in expect:
            want = self.constants.get(constant)
            if want is not None and part.header[member] != want:
                part.notes.append(f"{member} {part.header[member]:#010x}, expected {want:#010x}")

    def _check_prefix(self, part: Part, buf: Buffer, message: bytes, level: Level) -> None:
        try:
            prefix = self.prefix.parse(buf.data)
        except Exception as exc:  # noqa: BLE001 -- a short prefix is reported, the message still decodes
            part.notes.append(f"queue element prefix not decoded: {exc}")
            return
        part.prefix = prefix
        if checksum(buf.data[:self.prefix_size] + message) != 0:
            part.notes.append(f"queue element checksum {prefix.checkSum:#010x} does not match")
        count = -(-(self.prefix_size + len(message)) // self.element_size) if self.element_size else None
        if count is not None and prefix.elemCount != count:
            part.notes.append(f"elemCount {prefix.elemCount}, the message needs {count}")
        if level >= Level.FULL:
            part.buffers.append(DecodedBuffer(buf.role, buf.when, buf.slot, buf.data,
                                              self.ctx.defs.layout(ELEMENT_LAYOUT), dict(prefix.items()),
                                              title="queue element prefix", layouts=self.ctx.defs.layouts))


def _rpc_length(codec: GspCodec, ctx: Any) -> int:
    rpc = ctx[ELEMENT_RPC_MEMBER]
    return codec.header_size + len(rpc[PAYLOAD_MEMBER])


def _index_of(layout: Any, member: str, defs: Any) -> int:
    """Position of ``member``'s subcon in the layout's Struct (padding subcons included)."""
    for i, sub in enumerate(defs.struct(layout.name, flex=False).subcons):
        if sub.name == member:
            return i
    raise KeyError(member)


class GspOp(Op):
    """One RPC function or event: names, reassembles, decodes payload and RM params, pairs."""

    def __init__(self, codec: GspCodec, number: int, raw_name: str, event: bool) -> None:
        self.codec = codec
        self.ctx = codec.ctx
        self.number = number
        self.short = short_name(raw_name)
        self.name = gsp_name(raw_name)
        self.event = event
        self.payload_layout = self.ctx.profile.gsp_payloads.get(number)
        self.params = PAYLOAD_PARAMS.get(self.short)
        detail = DETAIL.get(self.short)
        self.detail_peek = peek(self.ctx.defs.layouts, self.payload_layout, detail[0]) if detail else None
        self.detail_kind = detail[1] if detail else None

    def label(self, record: Record) -> Label:
        if self.detail_peek is None:
            return Label(self.name)
        buf = record.buffer(Role.PAYLOAD)
        value = self.detail_peek(buf.data[self.codec.header_size:]) if buf is not None else None
        detail = self._detail(value)
        return Label(self.name, detail.name, detail.known)

    def _detail(self, value: int | None) -> Label:
        namer = self.ctx.names.control_label if self.detail_kind == "control" else self.ctx.names.class_label
        return namer(value)

    def decode(self, records: Sequence[Record], level: Level) -> Decoded:
        first = records[0]
        out = Decoded(Source.GSP, first.op, self.name, level=level)
        parts = [self.codec.part(r, level) for r in records]
        request = [p for p in parts if p.record.phase == first.phase]
        reply = [p for p in parts if p.record.phase != first.phase]
        for part in parts:
            for text in part.notes:
                out.note(text)
            if level >= Level.FULL:
                out.buffers.extend(part.buffers)
        head = request[0]
        out.extra["sequence"] = head.sequence
        out.extra["parts"] = len(request)
        out.args["seq"] = head.sequence
        payload = self._joined(request, out)
        value = self._payload(payload, first.phase, out, level)
        if value is not None and self.payload_layout is not None:  # a value is parsed by that layout
            layout = self.ctx.defs.layout(self.payload_layout)
            layouts = self.ctx.defs.layouts
            out.handles = handles_of(layout, value, layouts)
            hide = {"params", "paramsSize", "status", "reserved", "reserved0"}
            if self.params is not None:
                hide.add(self.params.key)
            out.args.update(summary_args(layout, value, frozenset(hide), layouts))
            if self.detail_kind is not None:
                key = DETAIL[self.short][0]
                out.extra[key] = value.get(key)
                detail = self._detail(value.get(key))
                out.detail, out.payload, out.known = detail.name, True, out.known and detail.known
        if reply:
            out.extra["reply_parts"] = len(reply)
            reply_payload = self._joined(reply, out)
            reply_value = self._payload(reply_payload, reply[0].record.phase, out, level)
            self._status(out, reply[0], reply_value)
        elif first.phase == Phase.RECV and not self.event:
            self._status(out, head, value)  # a response whose request is not in the trace
        if self.payload_layout is None and payload:
            out.note(f"the profile has no payload layout for {self.name}")
            out.known = self.short == CONTINUATION and out.known
        return out

    def _joined(self, parts: list[Part], out: Decoded) -> bytes:
        """The payload of a first record and its continuations, checking their sequences."""
        data = parts[0].payload
        for before, part in zip(parts, parts[1:]):
            if part.function != self.codec.continuation:
                out.note(f"part {part.record.seq} is function {part.function}, not a continuation")
            elif before.sequence is not None and part.sequence != before.sequence + 1:
                out.note(f"continuation sequence {part.sequence} does not follow {before.sequence}")
            data += part.payload
        return data

    def _payload(self, payload: bytes, phase: int, out: Decoded, level: Level) -> Any:
        """Decode the payload (and the RM params inside it); the parsed value or None."""
        if self.payload_layout is None:
            if level >= Level.FULL and payload:
                out.buffers.append(DecodedBuffer(Role.PAYLOAD, When.ONCE, 0, payload, title=f"{self.name} payload"))
            return None
        parsed = parse_buffer(self.ctx.defs, self.payload_layout, Buffer(Role.PAYLOAD, When.ONCE, payload))
        if parsed.note:
            out.note(parsed.note)
        if parsed.value is None:
            out.known = False
            if level >= Level.FULL:
                out.buffers.append(parsed)
            return None
        if level >= Level.FULL:
            out.buffers.append(parsed)
            if self.params is not None:
                self._params(self.params, parsed.value, phase, out)
        return parsed.value

    def _params(self, rule: ParamsRule, value: Any, phase: int, out: Decoded) -> None:
        params = value.get("params")
        if not isinstance(params, bytes):
            return
        when = When.BEFORE if phase == Phase.SEND else When.AFTER
        flags = next((value[m] for m in RPC_FLAG_MEMBERS if m in value), 0)
        buf = Buffer(rule.role, when, params)
        if flags & RPC_FLAG_SERIALIZED:
            out.buffers.append(DecodedBuffer(buf.role, when, 0, params, note="FINN-serialized params (not the C struct)"))
            return
        decoded = rule.decoder(self.ctx, value.get(rule.key), buf)
        if decoded.layout is None and decoded.note:
            out.known = False
        out.buffers.append(decoded)

    def _status(self, out: Decoded, head: Part, value: Any) -> None:
        if head.header is None:
            return
        result = head.header.rpc_result
        out.extra["rpc_result"] = result
        status = result
        if result == 0 and value is not None and self.payload_layout is not None:
            inner = status_of(self.ctx.defs.layout(self.payload_layout), value, self.ctx.defs.layouts)
            status = inner if inner is not None else 0
        out.status = status
        out.status_name = self.ctx.names.status(status)
        out.ok = self.ctx.names.status_ok(status)


class GspPairing:
    """The GSP keyer for ``rmtrace.calls.pair_calls``: requests open, answers close, chains fold.

    Keyed (fd, function, sequence).  It keeps which calls are open and which
    chains are running, so one instance serves one pass over a trace.
    """

    def __init__(self, codec: GspCodec) -> None:
        self.codec = codec
        self.open: set[Hashable] = set()
        self.chains: dict[tuple[int, int], tuple[Hashable, int, int | None]] = {}  # (fd, phase) -> key, next seq, bytes left
        ops = codec.ctx.profile
        self.total = {num: peek(codec.ctx.defs.layouts, ops.gsp_payloads.get(num), member)
                      for name, member in CHAIN_TOTAL.items() if (num := codec.by_name.get(name)) is not None}

    def __call__(self, rec: Record) -> PairAction | None:
        buf = rec.buffer(Role.PAYLOAD)
        codec = self.codec
        if buf is None or codec.function is None or codec.sequence is None or codec.length is None:
            return None
        function, sequence, length = codec.function(buf.data), codec.sequence(buf.data), codec.length(buf.data)
        if function is None or sequence is None or length is None:
            return None
        if function == codec.continuation:
            return self._continue(rec, sequence, len(buf.data) - codec.header_size)
        key = (rec.fd, function, sequence)
        if rec.phase == Phase.SEND:
            self.open.add(key)
            self._start_chain(rec, key, function, sequence, length, buf.data)
            return Pairing.OPEN, key
        if rec.phase == Phase.RECV and key in self.open:
            if self._start_chain(rec, key, function, sequence, length, buf.data):
                return Pairing.PART, key
            self.open.discard(key)
            return Pairing.CLOSE, key
        return None

    def _start_chain(self, rec: Record, key: Hashable, function: int, sequence: int, length: int, data: bytes) -> bool:
        """Note a chain if this first record is full; True when more parts follow."""
        codec = self.codec
        if codec.max_rpc is None or length < codec.max_rpc:
            return False
        reader = self.total.get(function)
        size = reader(data[codec.header_size:]) if reader is not None else None
        payload_layout = codec.ctx.defs.layout(codec.ctx.profile.gsp_payloads.get(function, ""))
        left = None if size is None or payload_layout is None else (
            payload_layout.size + size - (len(data) - codec.header_size))
        if left is not None and left <= 0:
            return False
        self.chains[(rec.fd, rec.phase)] = (key, sequence + 1, left)
        return True

    def _continue(self, rec: Record, sequence: int, carried: int) -> PairAction | None:
        chain = self.chains.get((rec.fd, rec.phase))
        if chain is None or chain[1] != sequence:
            return None
        key, _next, left = chain
        left = None if left is None else left - carried
        done = (left is not None and left <= 0) or (left is None and carried < self.codec.max_rpc - self.codec.header_size)
        if done:
            del self.chains[(rec.fd, rec.phase)]
            if rec.phase == Phase.RECV:
                self.open.discard(key)
                return Pairing.CLOSE, key
            return Pairing.PART, key
        self.chains[(rec.fd, rec.phase)] = (key, sequence + 1, left)
        return Pairing.PART, key


_CODECS: weakref.WeakKeyDictionary[Any, GspCodec | None] = weakref.WeakKeyDictionary()


def codec_for(profile: DriverProfile) -> GspCodec | None:
    """The (cached) GSP codec of ``profile``; None when the profile has no GSP layouts."""
    if profile not in _CODECS:
        try:
            _CODECS[profile] = GspCodec(context(profile))
        except RmtraceError:
            _CODECS[profile] = None
    return _CODECS[profile]


def gsp_table(profile: DriverProfile) -> dict[int, Op]:
    codec = codec_for(profile)
    if codec is None:
        return {}
    table: dict[int, Op] = {num: GspOp(codec, num, name, False) for num, name in profile.gsp_functions.items()}
    table.update((num, GspOp(codec, num, name, True)) for num, name in profile.gsp_events.items())
    return table


bind_source(Source.GSP, gsp_table)

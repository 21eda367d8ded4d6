"""Host semaphore/GR service messages (source SEMA): the construct mirror of rmtrace_sema.h.

``kmod_shim/rmtrace_sema.h`` is the definition; the Structs below mirror it
once and tests/test_sema.py checks them against its DWARF layout.  A message
is ``SemaHeader`` (24 bytes) then the body its op names (``BODIES``);
``SemaMessage`` is the two together with ``length`` rebuilt from the body, so
``build_message`` and the decoder use the same definitions.  The semantics
(which host counters move when) are in docs/sema-protocol.md.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from construct import Array, Bytes, Const, Construct, Int16ul, Int32sl, Int32ul, Int64ul, Rebuild, Struct, len_, this
from rmtrace.decoders.base import Decoded, DecodedBuffer, Level, Op, add_raw_buffers, bind_source
from rmtrace.decoders.ioctl import errno_name
from rmtrace.decoders.profiles.model import DriverProfile

from rmtrace.record import Buffer, Phase, Record, Role, Source, When, enum_name

SEMA_MAGIC = 0x414D4553
SEMA_VERSION = 1
NO_RANK = 0xFFFFFFFF


class SemaOp(enum.IntEnum):
    """enum rmt_sema_op"""

    REGISTER_CHANNEL = 1
    UNREGISTER_CHANNEL = 2
    PUBLISH_RING = 3
    PUBLISH_USERD = 4
    COMPLETION_HINT = 5
    RELEASE = 6
    ACQUIRE = 7
    LATCH_ARM = 8
    LATCH_FIRE = 9
    DRAIN_HOLD = 10
    DRAIN_RELEASE = 11
    SESSION_RESET = 12
    FAKED_COMPLETION = 13
    COUNTERS = 14


class ResetReason(enum.IntEnum):
    """enum rmt_sema_reset_reason"""

    GSP_INIT = 1
    NEW_CLIENT = 2
    HOST = 3


class DrainReason(enum.IntEnum):
    """enum rmt_sema_drain_reason"""

    CHANNEL_TEARDOWN = 1
    SESSION_RESET = 2
    DONE = 3
    TIMEOUT = 4


class Counter(enum.IntEnum):
    """enum rmt_sema_counter: the index of each host counter in a COUNTERS message."""

    PUB_CALLS = 0
    GR_REL = 1
    FAKED = 2
    DRAIN_HELD = 3
    HINTS = 4
    HINT_ERRORS = 5
    LATCH_FIRED = 6
    LATCH_ARMED = 7
    CHANNELS = 8
    SESSIONS = 9


SemaHeader = Struct(
    "magic" / Const(SEMA_MAGIC, Int32ul),
    "version" / Int16ul,
    "op" / Int16ul,
    "length" / Int32ul,
    "vgpu" / Int32ul,
    "session" / Int64ul,
)
"""struct rmt_sema_hdr, 24 bytes."""
HEADER_SIZE = SemaHeader.sizeof()

SemaMessage = Struct(
    *(sc if sc.name != "length" else "length" / Rebuild(Int32ul, len_(this.body) + HEADER_SIZE)
      for sc in SemaHeader.subcons),
    "body" / Bytes(this.length - HEADER_SIZE),
)
"""A whole message: the header with ``length`` rebuilt, then the body's bytes."""

SemaChannel = Struct(
    "client" / Int32ul,
    "channel" / Int32ul,
    "ring_va" / Int64ul,
    "userd_va" / Int64ul,
    "rank" / Int32ul,
    "rc" / Int32sl,
)
"""struct rmt_sema_channel: REGISTER_CHANNEL, UNREGISTER_CHANNEL."""

SemaPublish = Struct(
    "channel" / Int32ul,
    "rank" / Int32ul,
    "va" / Int64ul,
    "size" / Int64ul,
    "pub_calls" / Int64ul,
    "rc" / Int32sl,
    "reserved" / Int32ul,
)
"""struct rmt_sema_publish: PUBLISH_RING, PUBLISH_USERD."""

SemaHint = Struct(
    "channel" / Int32ul,
    "rank" / Int32ul,
    "value" / Int64ul,
    "rc" / Int32sl,
    "reserved" / Int32ul,
)
"""struct rmt_sema_hint: COMPLETION_HINT."""

SemaSem = Struct(
    "channel" / Int32ul,
    "rank" / Int32ul,
    "sema_va" / Int64ul,
    "value" / Int64ul,
    "counter" / Int64ul,
    "rc" / Int32sl,
    "reserved" / Int32ul,
)
"""struct rmt_sema_sem: RELEASE, ACQUIRE, FAKED_COMPLETION."""

SemaLatch = Struct(
    "rank" / Int32ul,
    "channel" / Int32ul,
    "generation" / Int32ul,
    "armed" / Int32ul,
)
"""struct rmt_sema_latch: LATCH_ARM, LATCH_FIRE."""

SemaDrain = Struct(
    "rank" / Int32ul,
    "channel" / Int32ul,
    "held" / Int32ul,
    "reason" / Int32ul,
    "held_ns" / Int64ul,
)
"""struct rmt_sema_drain: DRAIN_HOLD, DRAIN_RELEASE."""

SemaSession = Struct(
    "old_session" / Int64ul,
    "new_session" / Int64ul,
    "client" / Int32ul,
    "reason" / Int32ul,
    "channels_dropped" / Int32ul,
    "latches_rearmed" / Int32ul,
)
"""struct rmt_sema_session: SESSION_RESET."""

SemaCounters = Struct(
    "count" / Rebuild(Int32ul, len_(this.value)),
    "reserved" / Int32ul,
    "value" / Array(this.count, Int64ul),
)
"""struct rmt_sema_counters: COUNTERS; value[i] is the counter ``Counter(i)``."""


STRUCTS: dict[str, Construct] = {
    "rmt_sema_hdr": SemaHeader, "rmt_sema_channel": SemaChannel, "rmt_sema_publish": SemaPublish,
    "rmt_sema_hint": SemaHint, "rmt_sema_sem": SemaSem, "rmt_sema_latch": SemaLatch, "rmt_sema_drain": SemaDrain,
    "rmt_sema_session": SemaSession, "rmt_sema_counters": SemaCounters,
}
"""Each C struct of rmtrace_sema.h and its mirror."""


@dataclass(frozen=True)
class SemaKind:
    """One op of the protocol: its body (a C struct name), the phase it travels in, and how it reads."""

    op: SemaOp
    struct: str
    phase: Phase
    status: str | None = None  # the body member holding the host's result (an rc)
    what: str = ""             # one line for docs and ``rmtrace decoders list``

    @property
    def body(self) -> Construct:
        return STRUCTS[self.struct]


SEMA_KINDS: dict[int, SemaKind] = {k.op: k for k in (
    SemaKind(SemaOp.REGISTER_CHANNEL, "rmt_sema_channel", Phase.SEND, "rc", "guest registers a channel; host derives its CE rank"),
    SemaKind(SemaOp.UNREGISTER_CHANNEL, "rmt_sema_channel", Phase.SEND, "rc", "guest drops a channel"),
    SemaKind(SemaOp.PUBLISH_RING, "rmt_sema_publish", Phase.SEND, "rc", "GPFIFO ring address published (pub_calls)"),
    SemaKind(SemaOp.PUBLISH_USERD, "rmt_sema_publish", Phase.SEND, "rc", "USERD address published (pub_calls)"),
    SemaKind(SemaOp.COMPLETION_HINT, "rmt_sema_hint", Phase.SEND, "rc", "guest hints new work; rc -22 on a stale channel"),
    SemaKind(SemaOp.RELEASE, "rmt_sema_sem", Phase.RECV, "rc", "host applied a GR semaphore release (gr_rel)"),
    SemaKind(SemaOp.ACQUIRE, "rmt_sema_sem", Phase.SEND, "rc", "guest waits for a semaphore value"),
    SemaKind(SemaOp.LATCH_ARM, "rmt_sema_latch", Phase.EVENT, None, "a rank's one-shot latch armed"),
    SemaKind(SemaOp.LATCH_FIRE, "rmt_sema_latch", Phase.EVENT, None, "a rank's one-shot latch fired (spent until re-armed)"),
    SemaKind(SemaOp.DRAIN_HOLD, "rmt_sema_drain", Phase.EVENT, None, "host holds completions while it drains (drain_held)"),
    SemaKind(SemaOp.DRAIN_RELEASE, "rmt_sema_drain", Phase.EVENT, None, "the drain hold ended"),
    SemaKind(SemaOp.SESSION_RESET, "rmt_sema_session", Phase.EVENT, None, "new GSP session or client context"),
    SemaKind(SemaOp.FAKED_COMPLETION, "rmt_sema_sem", Phase.RECV, "rc", "host completed work for the guest (faked)"),
    SemaKind(SemaOp.COUNTERS, "rmt_sema_counters", Phase.EVENT, None, "snapshot of the host counters"),
)}
"""The protocol: one entry per op (the construct bodies above, the phase each travels in)."""

HIDDEN_MEMBERS = frozenset({"reserved"})
HANDLE_MEMBERS = {"client": "hClient", "channel": "hChannel"}
"""Body members that are guest RM handles, under the names handle filters use."""


def counters_dict(values: Sequence[int]) -> dict[str, int]:
    """COUNTERS values by counter name (an index this rmtrace does not know keeps its number)."""
    return {enum_name(Counter, i).lower(): v for i, v in enumerate(values)}


def build_message(op: int, body: Mapping[str, Any], *, vgpu: int = 0, session: int = 0) -> bytes:
    """The bytes of one message, built with the same definitions the decoder parses with."""
    payload = SEMA_KINDS[op].body.build(body)
    return SemaMessage.build({"version": SEMA_VERSION, "op": op, "vgpu": vgpu, "session": session, "body": payload})


def message_record(op: int, body: Mapping[str, Any], *, vgpu: int = 0, session: int = 0, **header: Any) -> Record:
    """A SEMA record carrying one message, in the phase its op travels in (``header``: time_ns, pid, ...)."""
    kind = SEMA_KINDS[op]
    data = build_message(op, body, vgpu=vgpu, session=session)
    return Record(Source.SEMA, header.pop("phase", kind.phase), op=op,
                  buffers=(Buffer(Role.PAYLOAD, When.ONCE, data),), **header)


class SemaMessageOp(Op):
    """Decodes one message of a known op: header, body, status (rc), handles, summary."""

    def __init__(self, kind: SemaKind) -> None:
        self.kind = kind
        self.name = "SEMA_" + kind.op.name

    def decode(self, records: Sequence[Record], level: Level) -> Decoded:
        rec = records[0]
        out = Decoded(Source.SEMA, rec.op, self.name, level=level)
        buf = rec.buffer(Role.PAYLOAD)
        if buf is None:
            out.known = False
            out.note("no PAYLOAD buffer")
            add_raw_buffers(out, records, level)
            return out
        try:
            message = SemaMessage.parse(buf.data)
            body = self.kind.body.parse(message.body)
        except Exception as exc:  # noqa: BLE001 -- a malformed message stays raw, with the reason
            out.known = False
            out.note(f"not a {self.name} message: {exc}")
            add_raw_buffers(out, records, level)
            return out
        if message.op != rec.op:
            out.note(f"message op {message.op} differs from the record's op {rec.op}")
        if rec.phase != self.kind.phase:
            out.note(f"{self.name} travels as {self.kind.phase.name}, this record is {enum_name(Phase, rec.phase)}")
        out.args = {"vgpu": message.vgpu, "session": message.session}
        fields = {k: v for k, v in body.items() if not k.startswith("_") and k not in HIDDEN_MEMBERS}
        if self.kind.op == SemaOp.COUNTERS:
            fields = counters_dict(fields["value"])
        out.args.update(fields)
        out.handles = {alias: fields[name] for name, alias in HANDLE_MEMBERS.items() if name in fields}
        if self.kind.status is not None:
            rc = fields[self.kind.status]
            out.status = rc
            out.status_name = "0" if rc == 0 else f"{rc} {errno_name(-rc)}" if rc < 0 else str(rc)
            out.ok = rc == 0
        out.extra["body"] = fields
        if level >= Level.FULL:
            out.buffers.append(DecodedBuffer(buf.role, buf.when, buf.slot, buf.data, title="rmt_sema_hdr",
                                             value={k: v for k, v in message.items() if k != "body"}))
            out.buffers.append(DecodedBuffer(buf.role, buf.when, buf.slot, message.body,
                                             title=self.kind.struct, value=body))
        return out


def sema_table(profile: DriverProfile) -> dict[int, Op]:
    return {op: SemaMessageOp(kind) for op, kind in SEMA_KINDS.items()}


bind_source(Source.SEMA, sema_table)

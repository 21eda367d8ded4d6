"""The model's reports as sema-service records: the one adapter to the decoders' sema schema.

The host model says what it does as ``(op name, body)``; this module turns
that into SEMA records with the decoders' own construct definitions
(``rmtrace.decoders.sema``, mirroring kmod_shim/rmtrace_sema.h), compiled
once because a replay emits many, so the model's traffic decodes, shows in
``wedges``, ``diff`` and the TUI, and is byte for byte what a host service
following docs/sema-protocol.md emits (tests compare with ``build_message``).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from rmtrace.decoders.sema import SEMA_KINDS, SEMA_VERSION, DrainReason, ResetReason, SemaMessage, SemaOp
from rmtrace.record import Buffer, Record, RecordFlag, Role, Source, When, encode_record

REASONS: Mapping[str, type] = {"SESSION_RESET": ResetReason, "DRAIN_HOLD": DrainReason, "DRAIN_RELEASE": DrainReason}
"""Ops whose ``reason`` member the model names in words."""

_MESSAGE = SemaMessage.compile()
_BODIES = {op: kind.body.compile() for op, kind in SEMA_KINDS.items()}
_REPLAY = int(RecordFlag.REPLAY)


def message_bytes(op: int, body: Mapping[str, Any], vgpu: int, session: int) -> bytes:
    """One sema message (header and body), as ``rmtrace.decoders.sema.build_message`` builds it."""
    return _MESSAGE.build({"version": SEMA_VERSION, "op": op, "vgpu": vgpu, "session": session,
                           "body": _BODIES[op].build(body)})


class SemaRecords:
    """``emit(op, body, pid, tid)`` for the model: builds the record and hands its bytes to ``sink``."""

    def __init__(self, sink: Callable[[bytes], None], clock: Any, session: Callable[[], int], vgpu: int = 0) -> None:
        self.sink = sink
        self.clock = clock
        self.session = session
        self.vgpu = vgpu

    def __call__(self, op: str, body: dict, pid: int, tid: int) -> None:
        reason = REASONS.get(op)
        if reason is not None:
            body = {**body, "reason": int(reason[body["reason"]])}
        number = SemaOp[op]
        data = message_bytes(number, body, self.vgpu, self.session())
        self.sink(encode_record(Record(Source.SEMA, SEMA_KINDS[number].phase, op=number, time_ns=self.clock.now,
                                       pid=pid, tid=tid or pid, flags=_REPLAY,
                                       buffers=(Buffer(Role.PAYLOAD, When.ONCE, data),))))

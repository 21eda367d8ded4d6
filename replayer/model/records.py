"""The model's reports as sema-service records: the one adapter to the decoders' sema schema.

The host model says what it does as ``(op name, body)``; this module turns
that into SEMA records with the decoders' own construct definitions
(``rmtrace.decoders.sema``, mirroring kmod_shim/rmtrace_sema.h), so the
model's traffic decodes, shows in ``wedges``, ``diff`` and the TUI, and is
byte for byte what a host service following docs/sema-protocol.md emits.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from rmtrace.decoders.sema import DrainReason, ResetReason, SemaOp, message_record
from rmtrace.record import RecordFlag

REASONS: Mapping[str, type] = {"SESSION_RESET": ResetReason, "DRAIN_HOLD": DrainReason, "DRAIN_RELEASE": DrainReason}
"""Ops whose ``reason`` member the model names in words."""


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
        record = message_record(SemaOp[op], body, vgpu=self.vgpu, session=self.session(),
                                time_ns=self.clock.now, pid=pid, tid=tid or pid, flags=RecordFlag.REPLAY)
        self.sink(record.encode())

"""The model's reports as records: the one adapter to the decoders' sema and GSP definitions.

The host model says what it does as ``(op name, body)``; this module turns
that into SEMA records with the decoders' own construct definitions
(``rmtrace.decoders.sema``, mirroring kmod_shim/rmtrace_sema.h), compiled
once because a replay emits many, so the model's traffic decodes, shows in
``wedges``, ``diff`` and the TUI, and is byte for byte what a host service
following docs/sema-protocol.md emits (tests compare with ``build_message``).
The RPC layer of the model's exchanges with the host (UVM's own RM objects,
allocated and freed through GSP_RM_ALLOC and FREE) goes out as GSP records
(docs/gsp-records.md) the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rmtrace.decoders.context import context
from rmtrace.decoders.gsp import codec_for
from rmtrace.decoders.profiles.model import DriverProfile
from rmtrace.decoders.roles import GSP_NUMBERS, GspRole
from rmtrace.decoders.sema import SEMA_KINDS, SEMA_VERSION, SemaMessage, SemaOp

from rmtrace.errors import RmtraceError
from rmtrace.record import Buffer, Phase, Record, RecordFlag, Role, Source, When, encode_record

_MESSAGE = SemaMessage.compile()
_BODIES = {op: kind.body.compile() for op, kind in SEMA_KINDS.items()}
_REPLAY = int(RecordFlag.REPLAY | RecordFlag.SYNTHETIC)
"""The model's records are the host's, produced by a replay: never the traced process's own."""
RPC_PENDING = 0xFFFFFFFF
"""rpc_result of a request (the host overwrites it with the NV_STATUS in its response)."""


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

    def __call__(self, op: SemaOp, body: dict, pid: int, tid: int) -> None:
        data = message_bytes(op, body, self.vgpu, self.session())
        self.sink(encode_record(Record(Source.SEMA, SEMA_KINDS[op].phase, op=op, time_ns=self.clock.now,
                                       pid=pid, tid=tid or pid, flags=_REPLAY,
                                       buffers=(Buffer(Role.PAYLOAD, When.ONCE, data),))))


class GspRecords:
    """The RPCs of the model's exchanges (``alloc``/``free``) as GSP records: each one the request the
    guest's RM sends and the response the host gives, built with the decoders' GSP definitions."""

    def __init__(self, sink: Callable[[bytes], None], clock: Any, profile: DriverProfile) -> None:
        self.sink = sink
        self.clock = clock
        self.profile = profile
        codec = codec_for(profile)
        if codec is None:
            raise RmtraceError(f"profile {profile.version} has no GSP layouts: the model's RPCs cannot be written")
        self.codec = codec
        self.defs = context(profile).defs
        self.sequence = 0

    @staticmethod
    def available(profile: DriverProfile) -> bool:
        return codec_for(profile) is not None

    def alloc(self, pid: int, h_client: int, h_parent: int, h_object: int, cls: int, **params: Any) -> None:
        info = self.profile.classes.get(cls)
        layout = info.alloc_params if info is not None else None
        data = b""
        defined = self.defs.layout(layout) if params and layout is not None else None
        if layout is not None and defined is not None:
            value, _ = self.defs.parse(layout, bytes(defined.size), flex=False)
            value.update(params)
            data = self.defs.struct(layout, flex=False).build(value)
        self._exchange(GspRole.RM_ALLOC, {"hClient": h_client, "hParent": h_parent, "hObject": h_object,
                                        "hClass": cls, "params": data}, pid)

    def free(self, pid: int, h_client: int, h_parent: int, h_object: int) -> None:
        self._exchange(GspRole.FREE, {"params": {"hRoot": h_client, "hObjectParent": h_parent, "hObjectOld": h_object,
                                           "status": 0}},
                       pid)

    def _exchange(self, role: GspRole, values: Mapping[str, Any], pid: int) -> None:
        function = GSP_NUMBERS[role]
        payload = self.codec.payload(function, values)
        self.sequence += 1
        for phase, result in ((Phase.SEND, RPC_PENDING), (Phase.RECV, 0)):
            message = self.codec.build(function, payload, self.sequence, rpc_result=result,
                                       rpc_result_private=result)
            self.sink(encode_record(Record(Source.GSP, phase, op=function, time_ns=self.clock.now, pid=pid,
                                           tid=pid, flags=_REPLAY,
                                           buffers=(Buffer(Role.PAYLOAD, When.ONCE, message),))))

"""Kernel calls (source UVM, op KCALL_BASE + n): the nvUvmInterface* calls UVM makes into RM.

rmtrace.ko's probes record them as UVM calls with numbers no UVM ioctl uses
(``enum rmt_kcall``, kmod_shim/rmtrace_kmod.h, mirrored in
rmtrace.capture.kmod): an ARG buffer of the argument registers, NESTED slot 0
the GPU's UUID where the call takes one, and the return value in the EXIT.
Only what is not a kernel address is shown: the UUID, the RM handles, the
NV_STATUS (``void`` for the calls that return none).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from rmtrace.decoders.base import Decoded, Level, Op, add_raw_buffers, bind_source
from rmtrace.decoders.context import Context, context
from rmtrace.decoders.ioctl import arg_buffer, split_call
from rmtrace.decoders.profiles.model import DriverProfile

from rmtrace.capture.kmod import KCALL_BASE, KCALLS, KernelCall
from rmtrace.record import Record, Role, Source, When

UUID_SIZE = 16
VOID = "void"
"""The result of a void call that returned (shown ``= void``; ``= ?`` stays for a result the trace does not hold)."""


def uuid_text(raw: bytes) -> str:
    """A GPU UUID as nvidia-smi writes it: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx."""
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


class KernelCallOp(Op):
    def __init__(self, ctx: Context, op: int, call: KernelCall) -> None:
        self.ctx = ctx
        self.op = op
        self.call = call
        self.name = call.symbol

    def decode(self, records: Sequence[Record], level: Level) -> Decoded:
        out = Decoded(Source.UVM, self.op, self.name, level=level)
        _enter, exit_ = split_call(records)
        uuid = next((b.data for r in records for b in r.buffers
                     if b.role == Role.NESTED and b.slot == 0 and len(b.data) == UUID_SIZE), None)
        if uuid is not None:
            out.args["uuid"] = uuid_text(uuid)
        regs = arg_buffer(records, Role.ARG, When.BEFORE)
        if regs is not None and len(regs.data) == 8 * len(self.call.args):
            for name, value in zip(self.call.args, struct.unpack(f"<{len(self.call.args)}Q", regs.data)):
                if name.startswith("h"):  # an RM handle (the rest are kernel addresses: never shown)
                    out.handles[name] = out.args[name] = value & 0xFFFFFFFF
        if exit_ is not None and self.call.returns_status:
            out.status = exit_.ret & 0xFFFFFFFF
            out.status_name = self.ctx.names.status(out.status)
            out.ok = self.ctx.names.status_ok(out.status)
        elif exit_ is not None:  # a void function returned: that it did is its whole result
            out.status_name = VOID
            out.ok = True
        add_raw_buffers(out, records, level)
        return out


def kcall_table(profile: DriverProfile) -> dict[int, Op]:
    ctx = context(profile)
    return {KCALL_BASE + int(n): KernelCallOp(ctx, KCALL_BASE + int(n), call) for n, call in KCALLS.items()}


bind_source(Source.UVM, kcall_table)

"""UVM ioctls (source UVM): one table entry per UVM command of the profile.

op is the raw ioctl number (UVM does not _IOC-encode on Linux); the ARG buffer
is the command's params struct, which ends in its NV_STATUS ``rmStatus``.
"""

from __future__ import annotations

from rmtrace.decoders.base import Op, bind_source
from rmtrace.decoders.context import context
from rmtrace.decoders.ioctl import IoctlOp
from rmtrace.decoders.profiles.model import DriverProfile

from rmtrace.record import Source

UVM_PREFIX = "UVM_"


def uvm_name(name: str) -> str:
    """UVM commands are shown with their UVM_ prefix (UVM_REGISTER_GPU)."""
    return name if name.startswith(UVM_PREFIX) else UVM_PREFIX + name


def uvm_table(profile: DriverProfile) -> dict[int, Op]:
    ctx = context(profile)
    return {nr: IoctlOp(ctx, Source.UVM, nr, uvm_name(cmd.name), (cmd.params,)) for nr, cmd in profile.uvm.items()}


bind_source(Source.UVM, uvm_table)

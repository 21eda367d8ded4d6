"""RM ioctls (source RM): one table entry per escape of the profile.

op is the escape number (``_IOC_NR``).  Every escape decodes its argument
struct by the profile's layout; three escapes carry more, and their classes
are bound by escape name in ``ESCAPE_OPS`` (names are stable across drivers,
numbers and layouts come from the profile):

* RM_CONTROL (NVOS54): PARAMS by the control command's params layout, NESTED
  buffers by the command's embedded pointers; named by the command.
* RM_ALLOC (NVOS21, or NVOS64 with rights: the ARG size picks, see
  ``ARG_VARIANTS``): ALLOC_PARAMS by the class's alloc params layout, RIGHTS raw;
  named by the class.
* IOCTL_XFER_CMD: the inner escape's argument arrives as the XFER buffer; the
  call is decoded and named as that inner escape.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from rmtrace.decoders.base import Decoded, DecodedBuffer, Label, Level, Op, bind_source
from rmtrace.decoders.context import context
from rmtrace.decoders.ioctl import IoctlOp, arg_buffer
from rmtrace.decoders.names import short_name
from rmtrace.decoders.parse import peek
from rmtrace.decoders.profiles.model import DriverProfile
from rmtrace.decoders.rmparams import alloc_params, control_params, nested_array

from rmtrace.record import Record, Role, Source, When

ARG_VARIANTS = {"RM_ALLOC": ("NVOS21_PARAMETERS", "NVOS64_PARAMETERS")}
"""Escapes whose argument struct has several forms of different sizes."""


class NamedByArg(IoctlOp):
    """An escape named by one field of its argument: RM_CONTROL by its command, RM_ALLOC by its class."""

    key: str
    """The argument's field that names the call."""

    def key_of(self, data: bytes) -> int | None:
        """That field, read off the argument's bytes (for labels, without decoding the struct)."""
        raise NotImplementedError

    def name_of(self, value: int | None) -> Label:
        raise NotImplementedError

    def label(self, record: Record) -> Label:
        buf = record.buffer(Role.ARG)
        detail = self.name_of(self.key_of(buf.data) if buf is not None else None)
        return Label(self.name, detail.name, detail.known)

    def describe(self, out: Decoded, arg: Any, layout: Any) -> None:
        value = arg.get(self.key)
        detail = self.name_of(value)
        out.detail, out.payload = detail.name, True
        out.known = out.known and detail.known
        out.extra[self.key] = value


class ControlCall(NamedByArg):
    """RM_CONTROL: named by its command, params decoded by the command's layout."""

    hide = frozenset({"cmd", "paramsSize"})
    key = "cmd"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cmd = peek(self.ctx.defs.layouts, self.default_layout, "cmd")

    def key_of(self, data: bytes) -> int | None:
        return self.cmd(data) if self.cmd is not None else None

    def name_of(self, value: int | None) -> Label:
        return self.ctx.names.control_label(value)

    def more_buffers(self, out: Decoded, records: Sequence[Record], arg: Any) -> set[int]:
        cmd = arg.get("cmd") if arg is not None else None
        for rec in records:
            for buf in rec.buffers:
                if buf.role == Role.PARAMS:
                    out.buffers.append(control_params(self.ctx, cmd, buf))
                elif buf.role == Role.NESTED:
                    out.buffers.append(nested_array(self.ctx, cmd, buf))
        return {Role.PARAMS, Role.NESTED}


class AllocCall(NamedByArg):
    """RM_ALLOC: named by the class, alloc params decoded by the class's layout."""

    hide = frozenset({"hClass", "paramsSize", "flags"})
    key = "hClass"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.klass = {size: peek(self.ctx.defs.layouts, name, "hClass") for size, name in self.arg_layouts.items()}

    def key_of(self, data: bytes) -> int | None:
        reader = self.klass.get(len(data))  # the argument's size tells its form (ARG_VARIANTS)
        return reader(data) if reader is not None else None

    def name_of(self, value: int | None) -> Label:
        return self.ctx.names.class_label(value)

    def more_buffers(self, out: Decoded, records: Sequence[Record], arg: Any) -> set[int]:
        class_id = arg.get("hClass") if arg is not None else None
        for rec in records:
            for buf in rec.buffers:
                if buf.role == Role.ALLOC_PARAMS:
                    out.buffers.append(alloc_params(self.ctx, class_id, buf))
                elif buf.role == Role.RIGHTS:
                    out.buffers.append(DecodedBuffer(buf.role, buf.when, buf.slot, buf.data, title="rights requested"))
        return {Role.ALLOC_PARAMS, Role.RIGHTS}


class XferCall(IoctlOp):
    """IOCTL_XFER_CMD: a larger argument passed by pointer; decoded as the inner escape."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.inner_cmd = peek(self.ctx.defs.layouts, self.default_layout, "cmd")

    def inner(self, records: Sequence[Record]) -> tuple[Op | None, list[Record]]:
        """The inner escape's decoder, and the records with XFER buffers in the ARG role."""
        buf = arg_buffer(records, Role.ARG, When.BEFORE) or arg_buffer(records, Role.ARG, When.AFTER)
        cmd = self.inner_cmd(buf.data) if buf is not None and self.inner_cmd is not None else None
        op = self.table.get(cmd) if cmd is not None else None
        inner_records = [replace(r, op=r.op if cmd is None else cmd, buffers=tuple(
            replace(b, role=Role.ARG) for b in r.buffers if b.role == Role.XFER)) for r in records]
        return op, inner_records

    def label(self, record: Record) -> Label:
        op, inner = self.inner([record])
        return op.label(inner[0]) if op is not None else Label(self.name, known=False)

    def decode(self, records: Sequence[Record], level: Level) -> Decoded:
        outer = super().decode([replace(r, buffers=tuple(b for b in r.buffers if b.role == Role.ARG))
                                for r in records], level)
        op, inner = self.inner(records)
        if op is None:
            outer.known = False
            outer.note("the inner escape is not in the profile")
            return outer
        out = op.decode(inner, level)
        out.op = self.op
        out.extra["escape"] = inner[0].op  # what the call is, for rmtrace.semantics (op stays the record's)
        out.note(f"via {self.name}")
        if level >= Level.FULL:
            out.buffers[:0] = outer.buffers
        return out


ESCAPE_OPS = {"RM_CONTROL": ControlCall, "RM_ALLOC": AllocCall, "IOCTL_XFER_CMD": XferCall}
"""Escapes with more than an argument struct, by name; every other escape is a plain IoctlOp."""


def rm_table(profile: DriverProfile) -> dict[int, Op]:
    ctx = context(profile)
    table: dict[int, Op] = {}
    for nr, esc in profile.escapes.items():
        name = short_name(esc.name)
        layouts = (esc.struct,) + ARG_VARIANTS.get(name, ())
        table[nr] = ESCAPE_OPS.get(name, IoctlOp)(ctx, Source.RM, nr, name, layouts, table=table)
    return table


bind_source(Source.RM, rm_table)

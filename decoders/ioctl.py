"""What RM and UVM ioctls share: an argument struct read before and after the call.

An ioctl call is an ENTER record (buffers read BEFORE the call) and an EXIT
record (read AFTER, with the ioctl's return value and errno).  ``IoctlOp``
decodes the ARG buffer by the escape's (or UVM command's) layout, takes the
NV_STATUS from the AFTER copy, the handles and the summary arguments from the
AFTER copy when the call returned (RM fills in new handles) and from the
BEFORE copy otherwise.  Subclasses add what the argument struct points to
(``describe`` names it, ``more_buffers`` decodes it).
"""

from __future__ import annotations

import errno as _errno
from collections.abc import Mapping, Sequence
from typing import Any

from rmtrace.decoders.base import Decoded, DecodedBuffer, Label, Level, Op
from rmtrace.decoders.context import Context
from rmtrace.decoders.parse import HANDLE_ALIASES, STATUS_FIELDS, handles_of, parse_buffer, status_of, top_fields

from rmtrace.record import Buffer, Phase, Record, Role, When


def split_call(records: Sequence[Record]) -> tuple[Record, Record | None]:
    """(enter, exit) of an ioctl call; a lone exit stands in for both."""
    enter = records[0]
    exit_ = next((r for r in records if r.phase == Phase.EXIT), None)
    return enter, exit_


def arg_buffer(records: Sequence[Record], role: int, when: int) -> Buffer | None:
    for rec in records:
        buf = rec.buffer(role, when)
        if buf is not None:
            return buf
    return None


def in_summary(f: Any, hide: frozenset[str]) -> bool:
    """Whether a one-line summary shows member ``f``: all but pointers, statuses and ``hide``."""
    return not (f.kind == "ptr" or f.type == "NvP64" or f.name in STATUS_FIELDS or f.name in hide)


def summary_args(layout: Any, value: Any, hide: frozenset[str], layouts: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The members a one-line summary shows (``in_summary``), under the names rmtrace shows."""
    args: dict[str, Any] = {}
    for f, v in top_fields(layout, value, layouts):
        if not in_summary(f, hide):
            continue
        if f.kind == "array" and f.elem_kind == "char" and isinstance(v, bytes):
            v = v.split(b"\0", 1)[0].decode("utf-8", "replace")
        args[HANDLE_ALIASES.get(f.name, f.name)] = v
    return args


def errno_name(err: int) -> str:
    return _errno.errorcode.get(err, f"errno {err}")


class IoctlOp(Op):
    """An ioctl whose argument struct is one of ``arg_layouts`` (the buffer's size picks)."""

    hide: frozenset[str] = frozenset()
    """Argument members the summary shows another way (a command as its name, a size as the buffer)."""

    def __init__(self, ctx: Context, source: int, op: int, name: str, arg_layouts: Sequence[str | None],
                 table: Mapping[int, Op] | None = None) -> None:
        self.ctx = ctx
        self.table = {} if table is None else table  # the whole table (filled later), for ops carrying an op
        self.source = source
        self.op = op
        self.name = name
        names = [n for n in arg_layouts if n and ctx.defs.layout(n) is not None]
        self.arg_layouts = {layout.size: n for n in names if (layout := ctx.defs.layout(n)) is not None}
        self.default_layout = names[0] if names else (arg_layouts[0] if arg_layouts else None)

    def arg_layout(self, buf: Buffer | None) -> str | None:
        if buf is None:
            return self.default_layout
        return self.arg_layouts.get(len(buf.data), self.default_layout)

    def label(self, record: Record) -> Label:
        return Label(self.name)

    # hooks -----------------------------------------------------------------------------------

    def describe(self, out: Decoded, arg: Any, layout: Any) -> None:
        """Set ``out.detail`` (and ``out.payload``) from the parsed argument struct."""

    def more_buffers(self, out: Decoded, records: Sequence[Record], arg: Any) -> set[int]:
        """Decode the buffers the argument struct points to; return the roles handled."""
        return set()

    # -----------------------------------------------------------------------------------------

    def decode(self, records: Sequence[Record], level: Level) -> Decoded:
        out = Decoded(self.source, self.op, self.name, level=level)
        enter, exit_ = split_call(records)
        before_buf = arg_buffer(records, Role.ARG, When.BEFORE)
        after_buf = arg_buffer(records, Role.ARG, When.AFTER)
        parsed: list[DecodedBuffer] = []
        for buf in (before_buf, after_buf):
            if buf is not None:
                parsed.append(parse_buffer(self.ctx.defs, self.arg_layout(buf), buf))
        decoded = [p for p in parsed if p.value is not None]
        if parsed and not decoded:
            out.known = False
            out.note(parsed[0].note or "argument struct not decoded")
        returned = exit_ is not None and exit_.ret >= 0 and not exit_.err
        after = next((p for p in decoded if p.when == When.AFTER), None) if returned else None
        main = after or (decoded[0] if decoded else None)
        if main is not None:
            self.describe(out, main.value, main.layout)
            layouts = self.ctx.defs.layouts
            out.handles = handles_of(main.layout, main.value, layouts)
            out.args = summary_args(main.layout, main.value, self.hide, layouts)
        if exit_ is not None and not returned:
            out.errno = exit_.err or None
            out.status_name = errno_name(exit_.err) if exit_.err else f"ret {exit_.ret}"
            out.ok = False
        elif after is not None and exit_ is not None:
            out.status = status_of(after.layout, after.value, self.ctx.defs.layouts)
            if out.status is not None:
                out.status_name = self.ctx.names.status(out.status)
                out.ok = self.ctx.names.status_ok(out.status)
            else:  # no NV_STATUS member: the ioctl's own return value is the result
                out.status, out.status_name, out.ok = exit_.ret, str(exit_.ret), True
        elif exit_ is not None:
            out.status_name, out.ok = f"ret {exit_.ret}", exit_.ret >= 0
        if level >= Level.FULL:
            out.buffers.extend(parsed)
            claimed = {Role.ARG} | self.more_buffers(out, records, main.value if main else None)
            for rec in records:
                for buf in rec.buffers:
                    if buf.role not in claimed:
                        out.buffers.append(DecodedBuffer(buf.role, buf.when, buf.slot, buf.data,
                                                         note="not a buffer this call carries"))
            if any(b.layout is None and b.data and b.note for b in out.buffers):
                out.known = False
        return out

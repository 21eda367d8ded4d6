"""RM control and alloc params: one decoder for both ways they travel.

A control's params (and an alloc's) reach RM either from an ioctl (RM_CONTROL
PARAMS and NESTED buffers, RM_ALLOC ALLOC_PARAMS) or inside a GSP RPC
(GSP_RM_CONTROL / GSP_RM_ALLOC payloads); ``rm.py`` and ``gsp.py`` both decode
them here, so the two show the same fields the same way.
"""

from __future__ import annotations

import struct

from rmtrace.decoders.base import DecodedBuffer
from rmtrace.decoders.context import Context
from rmtrace.decoders.parse import parse_buffer

from rmtrace.record import Buffer

_ELEM_CODES = {1: "B", 2: "H", 4: "I", 8: "Q"}


def control_params(ctx: Context, cmd: int | None, buf: Buffer) -> DecodedBuffer:
    """A control's params buffer, by the command's params layout."""
    control = ctx.profile.controls.get(cmd) if cmd is not None else None
    name = ctx.names.control(cmd)[0] if cmd is not None else "?"
    if control is None or not control.params:
        out = DecodedBuffer(buf.role, buf.when, buf.slot, buf.data, title=f"{name} params")
        out.note = ("the profile does not define this command's params" if control is None
                    else "this command has no params struct")
        if control is not None and not buf.data:
            out.note = None
        return out
    out = parse_buffer(ctx.defs, control.params, buf)
    if control.size is not None and len(buf.data) != control.size and out.note is None:
        out.note = f"{len(buf.data)} bytes, the profile's {control.params} is {control.size}"
    return out


def alloc_params(ctx: Context, class_id: int | None, buf: Buffer) -> DecodedBuffer:
    """An alloc's params buffer, by the class's alloc params layout."""
    info = ctx.profile.classes.get(class_id) if class_id is not None else None
    if info is None or not info.alloc_params:
        title = f"{info.name if info else 'class ?' if class_id is None else f'class {class_id:#06x}'} alloc params"
        out = DecodedBuffer(buf.role, buf.when, buf.slot, buf.data, title=title)
        if buf.data:
            out.note = ("the profile does not know this class" if info is None
                        else "the profile has no alloc params layout for this class")
        return out
    return parse_buffer(ctx.defs, info.alloc_params, buf)


def nested_array(ctx: Context, cmd: int | None, buf: Buffer) -> DecodedBuffer:
    """A NESTED buffer: the array that embedded pointer ``buf.slot`` of the params points to."""
    pointers = ctx.profile.embedded_pointers(cmd) if cmd is not None else ()
    out = DecodedBuffer(buf.role, buf.when, buf.slot, buf.data)
    if buf.slot >= len(pointers):
        out.note = f"the profile knows no embedded pointer {buf.slot} in this command's params"
        return out
    ptr = pointers[buf.slot]
    out.title = f"{ptr.name}[]"
    size = ptr.elem_size
    if size <= 0:
        return out
    whole = len(buf.data) // size
    code = _ELEM_CODES.get(size)
    data = buf.data[:whole * size]
    if code is None:
        out.value = [data[i:i + size] for i in range(0, len(data), size)]
    else:
        out.value = list(struct.unpack(f"<{whole}{code}", data))
    if len(buf.data) % size:
        out.note = f"{len(buf.data) % size} bytes after {whole} elements of {size}"
    return out

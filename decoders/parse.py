"""Parsing a buffer against a profile layout, never raising, and peeking single fields.

``parse_buffer`` tries, in order: the whole layout (with its flexible array
member, if a rule sizes it), the fixed part with the tail kept raw, and raw
bytes; each fallback leaves a note saying why.  ``Peek`` reads one member at
a fixed offset with ``struct`` (the name level's only way into a buffer).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from typing import Any

from rmtrace.decoders.base import DecodedBuffer
from rmtrace.decoders.structs import SIGNED_KINDS, Definitions

from rmtrace.record import Buffer, BufferFlag

HANDLE_TYPES = frozenset({"NvHandle"})
"""Member types whose values are RM object handles."""

HANDLE_ALIASES = {"hRoot": "hClient", "hObjectParent": "hParent", "hObjectNew": "hObject", "hObjectOld": "hObject"}
"""NVOS struct member names -> the names rmtrace shows (RM_ALLOC(hClient=…, hParent=…, hObject=…))."""

STATUS_FIELDS = ("status", "rmStatus", "Status")
"""Members that carry a call's NV_STATUS (RM NVOS structs, UVM params, GSP payloads; ``Status`` in
nv_ioctl_alloc_os_event_t and nv_ioctl_free_os_event_t)."""

_UNREADABLE, _TRUNCATED = int(BufferFlag.UNREADABLE), int(BufferFlag.TRUNCATED)  # plain ints: tested per buffer


def parse_buffer(defs: Definitions, layout_name: str | None, buf: Buffer, title: str | None = None) -> DecodedBuffer:
    """``buf`` decoded as layout ``layout_name`` as far as its bytes allow."""
    out = DecodedBuffer(buf.role, buf.when, buf.slot, buf.data, title=title or layout_name, layouts=defs.layouts)
    if buf.flags & _UNREADABLE:
        out.note = "the pointer could not be read"
        return out
    layout = defs.layout(layout_name) if layout_name else None
    if layout is None or layout_name is None:
        if layout_name:
            out.note = f"layout {layout_name} is not in the profile"
        return out
    data = buf.data
    cut = " (cut at the capture limit)" if buf.flags & _TRUNCATED else ""
    if len(data) < layout.size:
        out.note = f"{len(data)} bytes{cut}, {layout_name} is {layout.size}: kept raw"
        return out
    try:
        out.value, used = defs.parse(layout_name, data)
        out.layout = layout
    except Exception:  # noqa: BLE001 -- a flexible member that does not fit: retry without it
        try:
            out.value, used = defs.parse(layout_name, data[:layout.size], flex=False)
            out.layout = layout
        except Exception as exc:  # noqa: BLE001 -- bytes no layout fits stay raw, with the reason
            out.note = f"not a {layout_name}: {exc}"
            return out
    if len(data) > used:
        out.note = f"{len(data) - used} bytes after the {used}-byte {layout_name}{cut}"
    return out


class Peek:
    """Reads one scalar member of a layout at its fixed offset (None when the buffer is too short)."""

    __slots__ = ("offset", "codec", "end")

    def __init__(self, layout: Any, name: str) -> None:
        f = layout.field(name)
        code = {1: "b", 2: "h", 4: "i", 8: "q"}[f.size]
        self.codec = struct.Struct("<" + (code if f.kind in SIGNED_KINDS else code.upper()))
        self.offset = f.offset
        self.end = f.offset + f.size

    def __call__(self, data: bytes) -> int | None:
        if len(data) < self.end:
            return None
        return self.codec.unpack_from(data, self.offset)[0]


def peek(layouts: Mapping[str, Any], layout_name: str | None, field: str) -> Peek | None:
    """A Peek for ``layout_name.field``, or None when the profile lacks either."""
    layout = layouts.get(layout_name) if layout_name else None
    if layout is None:
        return None
    try:
        return Peek(layout, field)
    except (KeyError, AttributeError):
        return None


def top_fields(layout: Any, value: Any, layouts: Mapping[str, Any] | None = None) -> Iterator[tuple[Any, Any]]:
    """(Field, value) of a parsed struct's members, bitfields flattened.

    With ``layouts``, members that are structs themselves (a wrapper such as
    NVOS02-with-fd, or rpc_free's NVOS00) are walked into as well.
    """
    for f in layout.fields:
        if f.bit_size is not None:
            unit = value.get(f"_bits{f.offset}")
            if unit is not None and f.name in unit:
                yield f, unit[f.name]
            continue
        if f.name not in value:
            continue
        inner = layouts.get(f.type) if layouts is not None and f.kind == "struct" else None
        if inner is not None and hasattr(value[f.name], "items"):
            yield from top_fields(inner, value[f.name], layouts)
        else:
            yield f, value[f.name]


def handles_of(layout: Any, value: Any, layouts: Mapping[str, Any] | None = None) -> dict[str, int]:
    """The handle members of a parsed struct, under the names rmtrace shows."""
    return {HANDLE_ALIASES.get(f.name, f.name): v for f, v in top_fields(layout, value, layouts)
            if f.type in HANDLE_TYPES}


def status_of(layout: Any, value: Any, layouts: Mapping[str, Any] | None = None) -> int | None:
    """The NV_STATUS member of a parsed struct, if it has one."""
    for f, v in top_fields(layout, value, layouts):
        if f.name in STATUS_FIELDS and isinstance(v, int):
            return v
    return None


def handle_values(layout: Any, value: Any, layouts: Mapping[str, Any]) -> Iterator[int]:
    """Every handle member's value in a parsed struct, nested structs and arrays of structs included."""
    for f in layout.fields:
        v = value.get(f.name) if f.name else None
        if v is None:
            continue
        if f.type in HANDLE_TYPES and isinstance(v, int):
            yield v
        elif f.kind == "struct" and f.type in layouts and hasattr(v, "items"):
            yield from handle_values(layouts[f.type], v, layouts)
        elif f.kind == "array" and f.elem in HANDLE_TYPES and isinstance(v, list):
            yield from (x for x in _flat(v) if isinstance(x, int))
        elif f.kind == "array" and f.elem_kind == "struct" and f.elem in layouts and isinstance(v, list):
            for item in _flat(v):
                yield from handle_values(layouts[f.elem], item, layouts)


def _flat(v: list) -> Iterator[Any]:
    for x in v:
        if isinstance(x, list):
            yield from _flat(x)
        else:
            yield x

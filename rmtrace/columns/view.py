"""A params buffer's members read when asked: the few the model needs, without parsing the struct.

The fold needs a handful of members of a channel's allocation params and of
three controls' params (an engine type, a ring address, a work-submit token);
a construct parse of the whole struct costs 10-100x reading them.
``StructView`` is a read-only mapping over a buffer's bytes that gives, member
by member, exactly what ``Definitions.parse`` gives for that member (an int, a
list of ints, bytes, a nested struct as another view); anything else (unions,
bitfields, arrays of structs, a flexible member) it takes from one real parse,
made on first need.  ``tests/test_columns_view.py`` checks every member of the
params layouts against construct, for every shipped profile.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from typing import Any

from rmtrace.decoders.base import DecodedBuffer
from rmtrace.decoders.profiles.model import DriverProfile
from rmtrace.decoders.structs import SCALAR_KINDS, SIGNED_KINDS, Definitions

from rmtrace.columns.argspec import laid_out
from rmtrace.layout import Field, Layout
from rmtrace.record import Buffer, BufferFlag, Record, Role

_CODES = {1: "B", 2: "H", 4: "I", 8: "Q"}
PARAMS_ROLES = (Role.ALLOC_PARAMS, Role.PARAMS)


class StructView(Mapping[str, Any]):
    """The members of a struct of ``layout`` at ``base`` in ``data``, each read when it is asked for."""

    def __init__(self, defs: Definitions, layout: Layout, data: bytes, base: int = 0,
                 parent: StructView | None = None, name: str = "") -> None:
        self._defs = defs
        self._layout = layout
        self._data = data
        self._base = base
        self._parent, self._name = parent, name  # a nested struct: member ``name`` of ``parent``
        self._members, self._scalars = layout_members(layout), layout_scalars(layout)

    @cached_property
    def _parsed(self) -> Any:
        """The whole struct as the decoders parse it: for what a view does not read itself."""
        if self._parent is not None:
            return self._parent._parsed[self._name]
        return self._defs.parse(self._layout.name, bytes(self._data))[0]

    def __getitem__(self, name: str) -> Any:
        scalar = self._scalars.get(name)
        if scalar is not None:  # the members the fold reads are numbers: one lookup, one unpack
            return scalar[1].unpack_from(self._data, self._base + scalar[0])[0]
        f = self._members.get(name)
        value = self._read(f) if f is not None else None
        return value if value is not None else self._parsed[name]

    def __contains__(self, name: object) -> bool:
        return name in self._members or name in self._parsed  # padding, units, a flexible member: parse

    def __iter__(self) -> Iterator[str]:
        # a parse built without compiling keeps construct's stream under "_io": not a member (the decoders
        # drop every "_" key too)
        return (k for k in self._parsed if not k.startswith("_"))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def _read(self, f: Field) -> Any:
        at = self._base + f.offset  # not a number: __getitem__ reads those (``layout_scalars``)
        if f.kind == "array" and len(f.dims) <= 1 and f.count and f.elem_kind in SCALAR_KINDS:
            size = f.size // f.count
            if size == 1:
                return bytes(self._data[at:at + f.size])
            if size in _CODES:
                return list(struct.unpack_from(f"<{f.count}{_code(size, f.elem_kind in SIGNED_KINDS)}", self._data, at))
            return None
        if f.kind == "struct":
            inner = self._defs.layouts.get(f.type)
            if inner is not None and inner.size == f.size and inner.kind != "union":
                return StructView(self._defs, inner, self._data, at, self, f.name)
        return None


def is_scalar(f: Field) -> bool:
    """Whether member ``f`` is one number, which ``scalar_codec`` reads."""
    return f.kind in SCALAR_KINDS and f.size in _CODES and f.bit_size is None


def scalar_codec(f: Field) -> struct.Struct:
    """How member ``f`` (``is_scalar``) is read, as ``Definitions.parse`` gives it."""
    return _SCALARS[f.size, f.kind in SIGNED_KINDS]


def _code(size: int, signed: bool) -> str:
    """struct's code of a little-endian integer of ``size`` bytes (in ``_CODES``)."""
    return _CODES[size].lower() if signed else _CODES[size]


_SCALARS = {(size, signed): struct.Struct("<" + _code(size, signed)) for size in _CODES for signed in (False, True)}
"""The little-endian integer of each size, unsigned and signed (compiled once: show reads millions)."""


_SCALAR_MEMBERS: dict[int, tuple[Layout, dict[str, tuple[int, struct.Struct]]]] = {}
"""``layout_scalars`` of each layout by its identity (as ``_MEMBERS``)."""


def layout_scalars(layout: Layout) -> dict[str, tuple[int, struct.Struct]]:
    """(offset, codec) of each of ``layout_members(layout)`` that is one number (``is_scalar``), as ``scalar_codec``
    reads it."""
    found = _SCALAR_MEMBERS.get(id(layout))
    if found is None:
        scalars = {name: (f.offset, scalar_codec(f))
                   for name, f in layout_members(layout).items() if is_scalar(f)}
        found = _SCALAR_MEMBERS[id(layout)] = (layout, scalars)
    return found[1]


_MEMBERS: dict[int, tuple[Layout, dict[str, Field]]] = {}
"""``layout_members`` of each layout by its identity (the layout kept, so its id is not reused): a Layout's hash
walks every one of its fields, more than reading the members costs."""


def layout_members(layout: Layout) -> dict[str, Field]:
    """The named members a parse of ``layout`` holds under their own name (not bitfields, which live in
    their units; none for a union, whose parse the view asks for)."""
    found = _MEMBERS.get(id(layout))
    if found is None:
        members = {} if layout.kind == "union" else {f.name: f for f, _ in laid_out(layout)
                                                     if f.name and f.bit_size is None}
        found = _MEMBERS[id(layout)] = (layout, members)
    return found[1]


def params_buffers(defs: Definitions, profile: DriverProfile, records: Sequence[Record], key: int) -> list[DecodedBuffer]:
    """The params buffers of ``records`` (alloc params by the class ``key``, control params by the command
    ``key``), their values as views: what the decoders' ``more_buffers`` parse at full depth."""
    out = []
    for rec in records:
        for buf in rec.buffers:
            if buf.role not in PARAMS_ROLES:
                continue
            layout = _readable_layout(defs, profile, buf, key)
            value = StructView(defs, layout, buf.data) if layout is not None else None
            out.append(DecodedBuffer(buf.role, buf.when, buf.slot, buf.data, layout, value, layouts=defs.layouts))
    return out


def params_view(defs: Definitions, profile: DriverProfile, buf: Buffer, key: int) -> StructView | None:
    """The value of the params buffer ``buf`` (by the class or command ``key``) as a view, as
    ``params_buffers`` makes it; None when its layout is unknown or the buffer was not read whole."""
    layout = _readable_layout(defs, profile, buf, key)
    return StructView(defs, layout, buf.data) if layout is not None else None


def _readable_layout(defs: Definitions, profile: DriverProfile, buf: Buffer, key: int) -> Layout | None:
    """The layout ``buf`` is read with, None when there is none or the buffer is not whole."""
    name = params_layout(profile, buf.role, key)
    layout = defs.layout(name) if name else None
    readable = not buf.flags & BufferFlag.UNREADABLE
    return layout if layout is not None and readable and len(buf.data) >= layout.size else None


def params_layout(profile: DriverProfile, role: int, key: int) -> str | None:
    """The layout a params buffer is parsed with (``rmparams.alloc_params`` / ``control_params``)."""
    if role == Role.ALLOC_PARAMS:
        info = profile.classes.get(key)
        return info.alloc_params if info is not None else None
    control = profile.controls.get(key)
    return control.params if control is not None else None


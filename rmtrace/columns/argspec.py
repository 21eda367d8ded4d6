"""Where the call table's fields sit in each record, per driver profile: the fixed-offset plan.

An ioctl's argument struct has one layout per size (``IoctlOp.arg_layouts``),
and in it the members the call table holds sit at fixed offsets: the
NV_STATUS, the handles, and the member that names the call (a control's
``cmd``, an allocation's ``hClass``).  :class:`Plan` works those offsets out
once per profile from the same layouts and the same decoder objects the
construct path uses, so the columnar pass reads exactly the values
``IoctlOp.decode`` would, without parsing a struct.  System calls need only
their header.

An operation the plan cannot read at fixed offsets (a user's decoder, the
XFER escape whose argument carries another escape, a layout whose status or
handles sit in bitfields or past a flexible member) is of kind ``PYTHON``:
its calls are decoded by the decoders themselves, one by one.
``tests/test_columns_argspec.py`` checks the plan against the construct decode
for every argument layout of every shipped profile.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from rmtrace.decoders import DecoderSet
from rmtrace.decoders.base import Op, RawOp
from rmtrace.decoders.ioctl import IoctlOp
from rmtrace.decoders.parse import HANDLE_ALIASES, HANDLE_TYPES, STATUS_FIELDS
from rmtrace.decoders.rm import AllocCall, ControlCall, NamedByArg
from rmtrace.decoders.structs import SCALAR_KINDS
from rmtrace.decoders.system import SysCall

from rmtrace.layout import Field, Layout
from rmtrace.record import Source

MAX_HANDLES = 6
"""Handle columns of the call table; a layout with more handles is decoded in Python."""

CLASS_MEMBER = "hClass"
"""The member an allocation escape that is not named by its class keeps it in (NVOS02, say)."""
_INT_SIZES = (1, 2, 4, 8)


class Kind(enum.IntEnum):
    """How an operation's calls get their columns."""

    PYTHON = 0   # the decoders decode each call (construct)
    IOCTL = 1    # fixed offsets in the argument struct
    SYSCALL = 2  # the record header alone
    RAW = 3      # no decoder knows the operation: named by number, nothing decoded


@dataclass(frozen=True)
class Scalar:
    """An integer member at a fixed offset."""

    offset: int
    size: int
    signed: bool


@dataclass(frozen=True)
class ArgLayout:
    """The call table's members in one argument layout."""

    layout: str
    size: int
    key: Scalar | None
    """The member naming the call (``NamedByArg.key``: a control's command, an allocation's class), else
    a class member (``hClass``: an allocation the escape does not name by it); None when neither."""
    names_call: bool
    """Whether ``key`` names the call (its detail) rather than only saying its class."""
    status: Scalar | None
    handles: tuple[tuple[str, Scalar], ...]
    """Handle members under the names rmtrace shows, in the order a decode lists them."""


@dataclass(frozen=True)
class OpPlan:
    """How one (source, op) is read."""

    kind: Kind
    name: str
    op: Any
    arg_layouts: Mapping[int, ArgLayout | None]
    """Argument size -> its layout's members (None: a size the decode leaves raw)."""
    default: ArgLayout | None
    """The layout of any other size at least as long (None: such a size stays raw)."""
    result: str | None = None
    """SYSCALL: the header field holding the result (``SysCall.result``)."""

    def arg(self, length: int) -> ArgLayout | None:
        """The members of an argument buffer of ``length`` bytes, or None when it would not decode."""
        if length in self.arg_layouts:
            return self.arg_layouts[length]
        default = self.default
        return default if default is not None and length >= default.size else None


class Plan:
    """Every operation's reading plan for one DecoderSet, built on first use."""

    def __init__(self, decoders: DecoderSet) -> None:
        self.decoders = decoders
        self._ops: dict[tuple[int, int], OpPlan] = {}

    def op(self, source: int, op: int) -> OpPlan:
        key = (source, op)
        found = self._ops.get(key)
        if found is None:
            found = self._ops[key] = _plan(self.decoders, source, op)
        return found


def _plan(decoders: DecoderSet, source: int, op: int) -> OpPlan:
    decoder = decoders.op(source, op)
    if type(decoder) is RawOp:
        return OpPlan(Kind.RAW, decoder.name, decoder, {}, None)
    if type(decoder) is SysCall and source == Source.SYS:
        return OpPlan(Kind.SYSCALL, decoder.name, decoder, {}, None, decoder.result)
    if not _table_ioctl(decoder):
        return OpPlan(Kind.PYTHON, decoder.name, decoder, {}, None)
    named = isinstance(decoder, NamedByArg)
    key = decoder.key if isinstance(decoder, NamedByArg) else CLASS_MEMBER
    defs = decoder.ctx.defs
    by_size: dict[int, ArgLayout | None] = {}
    for size, name in decoder.arg_layouts.items():
        by_size[size] = arg_layout(defs.layouts, name, key, defs.flex, named)
        if by_size[size] is None:
            return OpPlan(Kind.PYTHON, decoder.name, decoder, {}, None)
    default = None
    if decoder.default_layout is not None and decoder.default_layout in defs.layouts:
        default = arg_layout(defs.layouts, decoder.default_layout, key, defs.flex, named)
        if default is None:
            return OpPlan(Kind.PYTHON, decoder.name, decoder, {}, None)
    return OpPlan(Kind.IOCTL, decoder.name, decoder, by_size, default)


def _table_ioctl(decoder: Op) -> TypeGuard[IoctlOp]:
    """Whether ``decoder`` is one of the table's own ioctl decoders (exactly: a subclass, such as a
    user's decoder, may decode otherwise, so its calls go through Python)."""
    return type(decoder) in (IoctlOp, ControlCall, AllocCall)


def arg_layout(layouts: Mapping[str, Layout], name: str, key: str, flex: Mapping[str, Any],
               names_call: bool) -> ArgLayout | None:
    """The members of layout ``name`` at fixed offsets; None when one of them is not at a fixed offset.
    ``key`` is the member naming the call when ``names_call``, else a member that may be there."""
    layout = layouts[name]
    if layout.fields and _is_flex(layout.fields[-1]) and layout.fields[-1].name in flex:
        return None  # parsed with its flexible member, which may not fit: the decoders decide
    status: Scalar | None = None
    handles: dict[str, Scalar] = {}
    for f, offset in members(layout, layouts):
        if f.bit_size is not None:
            if f.name in STATUS_FIELDS or f.type in HANDLE_TYPES:
                return None
            continue
        if f.type in HANDLE_TYPES:
            scalar = _scalar(f, offset)
            if scalar is None:
                return None
            handles[HANDLE_ALIASES.get(f.name, f.name)] = scalar  # a later member of the same name wins, as in a dict
        if status is None and f.name in STATUS_FIELDS:
            status = _scalar(f, offset)
    if len(handles) > MAX_HANDLES:
        return None
    if names_call:  # NamedByArg.describe reads the parsed struct's own member
        found = next(((f, f.offset) for f, _ in laid_out(layout) if f.name == key and f.bit_size is None), None)
    else:  # a summary argument: the last member of that name in a walk into nested structs
        found = next(((f, at) for f, at in reversed(list(members(layout, layouts)))
                      if f.name == key and f.bit_size is None), None)
    key_scalar = _scalar(*found) if found is not None else None
    if key_scalar is not None and (key_scalar.size > 4 or key_scalar.signed):
        return None  # the call table keeps keys as 32-bit numbers, as every class id and command is
    if names_call and key_scalar is None:
        return None
    return ArgLayout(name, layout.size, key_scalar, names_call, status, tuple(handles.items()))


def members(layout: Layout, layouts: Mapping[str, Layout], base: int = 0) -> Iterator[tuple[Field, int]]:
    """(member, absolute offset) in the order ``decoders.parse.top_fields`` walks a parsed value:
    named members present in the parse, nested structs walked into."""
    for f, _ in laid_out(layout):
        if not f.name and f.bit_size is None:
            continue  # an anonymous member is parsed under a made-up name, which a walk never asks for
        inner = layouts.get(f.type) if f.kind == "struct" and f.bit_size is None else None
        if inner is not None and inner.size == f.size:
            yield from members(inner, layouts, base + f.offset)
        else:
            yield f, base + f.offset


def laid_out(layout: Layout) -> Iterator[tuple[Field, int]]:
    """The members a parse of ``layout`` holds (``Definitions._build``: a member overlapping the one
    before it is left out; a trailing flexible member is not at a fixed offset)."""
    fields = list(layout.fields)
    if fields and _is_flex(fields[-1]):
        fields.pop()
    if layout.kind == "union":
        yield from ((f, f.offset) for f in fields if f.size)
        return
    pos = 0
    units: dict[tuple[int, int], bool] = {}  # a bitfield unit is in or out as its first member decides
    for f in fields:
        if f.bit_size is not None:
            unit = (f.offset, f.size)
            if unit not in units:
                units[unit] = f.offset >= pos
                if units[unit]:
                    pos = f.offset + f.size
            if units[unit]:
                yield f, f.offset
            continue
        if f.offset < pos:
            continue
        yield f, f.offset
        pos = f.offset + f.size


def _scalar(f: Field, offset: int) -> Scalar | None:
    """An integer member (what a parse gives as an int), or None."""
    if f.kind not in SCALAR_KINDS or f.size not in _INT_SIZES:
        return None
    return Scalar(offset, f.size, f.kind == "int")


def _is_flex(f: Field) -> bool:
    return f.kind == "array" and f.count == 0

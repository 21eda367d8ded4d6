"""What a decoder gives back, and how decoders are bound to (source, operation).

Every source module (``rm``, ``uvm``, ``gsp``, ``sema``, ``system``, ``mark``)
holds a table from operation number to an :class:`Op`, built from the driver
profile by a factory and bound to its source with :func:`bind_source`, as
scapy's ``bind_layers`` binds a layer to the field value that selects it.
Nothing dispatches with if-chains: the :class:`~rmtrace.decoders.DecoderSet`
looks the op up in the table and an unknown op gets :class:`RawOp`.

An ``Op`` answers at two levels:

* ``label(record)``: the name, and the detail that names the call (control
  command, class, RPC function) from a few bytes peeked at fixed offsets.  It
  never parses params: ``rmtrace show`` filters on it at full speed.
* ``decode(records, level)``: the records of one call (enter and exit, or the
  parts of a GSP request and its response), decoded at ``Level.CALL`` (the
  argument struct: status, handles, the arguments of a one-line summary) or
  ``Level.FULL`` (every buffer, field by field).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rmtrace.decoders.profiles.model import DriverProfile

from rmtrace.record import Record, Role, Source, When, enum_name


class Level(enum.IntEnum):
    """How deep a decode goes."""

    NAME = 0  # name and detail only (label)
    CALL = 1  # plus the argument struct: status, handles, summary arguments
    FULL = 2  # plus every buffer, field by field


@dataclass(frozen=True, slots=True)
class Label:
    """The name-level result: what this record is."""

    name: str
    detail: str | None = None
    known: bool = True


@dataclass(slots=True)
class DecodedBuffer:
    """One buffer of a record, decoded against a layout (or kept raw)."""

    role: int
    when: int
    slot: int
    data: bytes
    layout: Any = None        # the profile Layout it was parsed with, None when raw
    value: Any = None         # the construct Container (or list, or text) parsed from data
    note: str | None = None   # why it is raw or only partly decoded
    title: str | None = None  # what the buffer holds, e.g. "NV2080_CTRL_GPU_GET_INFO_V2_PARAMS"
    layouts: Mapping[str, Any] | None = None  # where nested layout names resolve

    @property
    def label(self) -> str:
        slot = f"[{self.slot}]" if self.role == Role.NESTED else ""
        return f"{enum_name(Role, self.role).lower()}{slot}/{enum_name(When, self.when).lower()}"


@dataclass(slots=True)
class Decoded:
    """A record or call, decoded.

    ``status`` is the call's result in its own terms (an NV_STATUS for RM, UVM
    and GSP calls, an rc for sema messages, the return value of a system call)
    and ``status_name`` its name; ``ok`` says whether it counts as success.
    ``errno`` is set when the ioctl itself failed before RM saw it.
    ``handles`` maps canonical names (hClient, hParent, hObject, hClass, ...)
    to values.  ``args`` are the one-line summary's arguments in order;
    ``payload`` says that ``detail`` stands for a decoded params/payload
    buffer (printed ``DETAIL{…}``).  ``known`` is True when every part was
    named from the profile (no raw fallbacks).
    """

    source: int
    op: int
    name: str
    detail: str | None = None
    known: bool = True
    status: int | None = None
    status_name: str | None = None
    ok: bool | None = None
    errno: int | None = None
    handles: dict[str, int] = field(default_factory=dict)
    args: dict[str, Any] = field(default_factory=dict)
    payload: bool = False
    buffers: list[DecodedBuffer] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    level: Level = Level.FULL

    @property
    def full_name(self) -> str:
        return f"{self.name}({self.detail})" if self.detail else self.name

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def to_dict(self, buffers: list[Any] | None = None) -> dict[str, Any]:
        """JSON-ready: every decoded field, and each buffer's bytes as hex (``buffers``: the buffers' objects
        as the caller made them, jsonl's pre-encoded ones; by default ``render.buffer_objects``)."""
        from rmtrace.decoders.render import buffer_objects, plain, plain_args  # render knows how to show each field type
        return {
            "source": enum_name(Source, self.source), "op": self.op, "name": self.name, "detail": self.detail,
            "known": self.known, "status": self.status, "status_name": self.status_name, "ok": self.ok,
            "errno": self.errno, "handles": dict(self.handles), "args": plain_args(self),
            "notes": list(self.notes), "extra": plain(self.extra) if self.extra else {},
            "buffers": buffer_objects(self.buffers) if buffers is None else buffers,
        }


class Op:
    """A decoder for one (source, operation): the base every table entry derives from."""

    name: str

    def label(self, record: Record) -> Label:
        return Label(self.name)

    def decode(self, records: Sequence[Record], level: Level) -> Decoded:
        raise NotImplementedError


class RawOp(Op):
    """An operation no table knows: named by number, every buffer kept raw."""

    def __init__(self, source: int, op: int) -> None:
        self.source = source
        self.op = op
        self.name = f"{enum_name(Source, source)}_OP_{op:#x}"

    def label(self, record: Record) -> Label:
        return Label(self.name, known=False)

    def decode(self, records: Sequence[Record], level: Level) -> Decoded:
        out = Decoded(self.source, self.op, self.name, known=False, level=level)
        out.note(f"no decoder for {enum_name(Source, self.source)} operation {self.op:#x}: shown raw")
        add_raw_buffers(out, records, level)
        return out


def add_raw_buffers(out: Decoded, records: Iterable[Record], level: Level) -> None:
    """Every buffer of ``records``, kept raw (at FULL level)."""
    if level < Level.FULL:
        return
    for rec in records:
        for buf in rec.buffers:
            out.buffers.append(DecodedBuffer(buf.role, buf.when, buf.slot, buf.data))


TableFactory = Callable[[DriverProfile], Mapping[int, Op]]
_BINDINGS: dict[int, list[TableFactory]] = {}


def bind_source(source: int, factory: TableFactory) -> None:
    """Register ``factory(profile) -> {op: Op}`` for ``source`` (later bindings win per op)."""
    _BINDINGS.setdefault(int(source), []).append(factory)


def bound_tables(profile: DriverProfile) -> dict[int, dict[int, Op]]:
    """Every bound source's table for ``profile``."""
    tables: dict[int, dict[int, Op]] = {}
    for source, factories in _BINDINGS.items():
        table: dict[int, Op] = {}
        for factory in factories:
            table.update(factory(profile))
        tables[source] = table
    return tables

"""The leaf fields of a call's buffers: where each one is, what type it has, what path names it.

A call's buffers are named as the replay tables name them (``arg``, ``params``,
``alloc``, ``nested0`` ..., ``rights``) and walked by the driver profile's
layouts down to scalars: structs and arrays of structs are entered, arrays of
bytes or characters stay one leaf, an ``NvUuid`` is one 16-byte leaf, a union
is one leaf of its bytes.  A leaf's ``path`` spells its indices
(``params.fbInfoList[3].data``), its ``pattern`` does not
(``params.fbInfoList[*].data``), which is how the tables name fields.  The
remapping (``compile.py``) and the field-by-field comparison
(``rmtrace.replayer.oracle``) both read calls through these leaves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rmtrace.decoders.profiles.model import DriverProfile
from rmtrace.decoders.profiles.pointers import SCALAR_SIZES

from rmtrace.record import Record, Role, Source

BYTE_ELEMS = frozenset({"NvU8", "NvS8", "char", "uint8_t", "int8_t", "NvBool"})
"""Arrays of these are one leaf: a string, a byte blob, a bitmap."""
UUID_TYPES = frozenset({"NvUuid", "NvProcessorUuid"})
RM_ALLOC_ARGS = {32: "NVOS21_PARAMETERS", 48: "NVOS64_PARAMETERS"}
"""RM_ALLOC's argument struct by its size (the ioctl's size picks the form)."""
RM_ALLOC, RM_CONTROL, RM_XFER, RM_ALLOC_MEMORY = 0x2B, 0x2A, 0xD3, 0x27
BUFFER_NAMES: dict[int, str] = {Role.ARG: "arg", Role.PARAMS: "params", Role.ALLOC_PARAMS: "alloc", Role.RIGHTS: "rights",
                Role.XFER: "xfer"}


@dataclass(frozen=True, slots=True)
class Leaf:
    path: str
    pattern: str
    offset: int
    size: int
    type: str
    kind: str
    """The layout field's kind (uint, int, ptr, bool, enum, char...), ``bytes`` for a blob, ``uuid``."""


def buffer_name(role: int, slot: int) -> str:
    return f"nested{slot}" if role == Role.NESTED else BUFFER_NAMES.get(role, f"role{role}")


class Walker:
    """Leaves of one profile's layouts, cached per (layout, prefix, length)."""

    def __init__(self, profile: DriverProfile) -> None:
        self.profile = profile
        self.layouts: Mapping[str, Any] = profile.layouts
        self._cache: dict[tuple[str | None, str, int, int], tuple[Leaf, ...]] = {}

    # -- which layout a buffer has

    def layout_of(self, record: Record, role: int, slot: int, data_len: int) -> str | None:
        """The layout name of a buffer of ``record`` (None: no layout, compared as bytes)."""
        if record.source == Source.UVM:
            cmd = self.profile.uvm.get(record.op)
            return cmd.params if role == Role.ARG and cmd is not None else None
        if role in (Role.ARG, Role.XFER):
            nr = record.op
            if role == Role.XFER or nr == RM_XFER:
                inner = self.xfer_inner(record)
                if role == Role.ARG and nr == RM_XFER:
                    esc = self.profile.escapes.get(nr)
                    return esc.struct if esc is not None else None
                nr = inner if inner is not None else -1
            if nr == RM_ALLOC:
                return RM_ALLOC_ARGS.get(data_len)
            esc = self.profile.escapes.get(nr)
            return esc.struct if esc is not None else None
        if role == Role.PARAMS:
            number = self.control_cmd(record)
            control = self.profile.controls.get(number) if number is not None else None
            return control.params if control is not None else None
        if role == Role.ALLOC_PARAMS:
            cls = self.alloc_class(record)
            info = self.profile.classes.get(cls) if cls is not None else None
            return info.alloc_params if info is not None else None
        return None

    @staticmethod
    def xfer_inner(record: Record) -> int | None:
        arg = record.buffer(Role.ARG)
        return int.from_bytes(arg.data[0:4], "little") if arg is not None and len(arg.data) >= 4 else None

    def _arg_of(self, record: Record) -> bytes | None:
        buf = record.buffer(Role.XFER) if record.op == RM_XFER else record.buffer(Role.ARG)
        return buf.data if buf is not None else None

    def control_cmd(self, record: Record) -> int | None:
        arg = self._arg_of(record)
        return int.from_bytes(arg[8:12], "little") if arg is not None and len(arg) >= 12 else None

    def alloc_class(self, record: Record) -> int | None:
        arg = self._arg_of(record)
        return int.from_bytes(arg[12:16], "little") if arg is not None and len(arg) >= 16 else None

    # -- leaves

    def leaves(self, layout: str | None, prefix: str, length: int, elem_size: int = 0) -> tuple[Leaf, ...]:
        """The leaves of a ``length``-byte buffer laid out as ``layout`` (a NESTED array: ``elem_size``)."""
        key = (layout, prefix, length, elem_size)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = tuple(self._leaves(layout, prefix, length, elem_size))
        return found

    def _leaves(self, layout: str | None, prefix: str, length: int, elem_size: int) -> list[Leaf]:
        if elem_size:
            whole = length // elem_size
            elems = [Leaf(f"{prefix}[{i}]", f"{prefix}[*]", i * elem_size, elem_size, f"u{8 * elem_size}", "uint")
                     for i in range(whole)]
            return elems + self._tail(prefix, whole * elem_size, length)
        info = self.layouts.get(layout) if layout else None
        if info is None:
            return [Leaf(prefix, prefix, 0, length, "bytes", "bytes")] if length else []
        out: list[Leaf] = []
        self._walk(info, prefix, prefix, 0, length, out)
        return out + self._tail(prefix, info.size, length)

    @staticmethod
    def _tail(prefix: str, start: int, length: int) -> list[Leaf]:
        """Bytes past what the layout covers (CARD_INFO's further cards, a longer struct than the profile's)."""
        return [Leaf(f"{prefix}+{start}", f"{prefix}+tail", start, length - start, "bytes", "bytes")] \
            if length > start else []

    def _walk(self, layout: Any, path: str, pattern: str, base: int, limit: int, out: list[Leaf]) -> None:
        seen: set[int] = set()
        for f in layout.fields:
            offset = base + f.offset
            if f.size == 0 or offset + f.size > limit:
                continue
            if f.bit_size is not None:  # bitfields share their storage unit: one leaf for the unit
                if offset in seen:
                    continue
                seen.add(offset)
            name = f.name or f"@{f.offset}"
            p, q = f"{path}.{name}", f"{pattern}.{name}"
            if f.type in UUID_TYPES:
                out.append(Leaf(p, q, offset, f.size, f.type, "uuid"))
            elif f.kind == "struct" and f.type in self.layouts:
                self._walk(self.layouts[f.type], p, q, offset, limit, out)
            elif f.kind == "array" and f.count:
                self._array(f, p, q, offset, limit, out)
            else:
                out.append(Leaf(p, q, offset, f.size, f.type, "bytes" if f.kind == "union" else f.kind))

    def _array(self, f: Any, path: str, pattern: str, offset: int, limit: int, out: list[Leaf]) -> None:
        elem = f.elem or ""
        step = f.size // f.count
        if elem in BYTE_ELEMS or f.elem_kind == "char" or step <= 0:
            out.append(Leaf(path, pattern, offset, f.size, f.type, "bytes"))
            return
        inner = self.layouts.get(elem) if f.elem_kind in ("struct", "union") else None
        for i in range(f.count):
            at = offset + i * step
            if at + step > limit:
                break
            p, q = f"{path}[{i}]", f"{pattern}[*]"
            if elem in UUID_TYPES:
                out.append(Leaf(p, q, at, step, elem, "uuid"))
            elif inner is not None and f.elem_kind == "struct":
                self._walk(inner, p, q, at, limit, out)
            else:
                kind = "bytes" if f.elem_kind == "union" else (f.elem_kind or "uint")
                out.append(Leaf(p, q, at, step, elem, kind if SCALAR_SIZES.get(elem, step) == step else "bytes"))

    def buffer_leaves(self, record: Record, role: int, slot: int, length: int) -> tuple[Leaf, ...]:
        """The leaves of one buffer of ``record`` (its role and slot), ``length`` bytes long."""
        name = buffer_name(role, slot)
        if role == Role.NESTED:
            pointers = self.profile.embedded_pointers(self.control_cmd(record) or -1)
            size = pointers[slot].elem_size if slot < len(pointers) else 0
            return self.leaves(None, name, length, size)
        return self.leaves(self.layout_of(record, role, slot, length), name, length)


def call_keys(walker: Walker, record: Record) -> list[str]:
    """The replay tables' keys of a call: ``esc:NR`` (and its inner escape's), ``ctrl:CMD``, ``class:ID``,
    ``memclass:ID``, ``uvm:NR`` (``rmtrace.decoders.profiles.safety``)."""
    if record.source == Source.UVM:
        return [f"uvm:{record.op}"]
    nr = record.op
    keys = [f"esc:{nr:#x}"]
    if nr == RM_XFER:
        inner = walker.xfer_inner(record)
        if inner is not None:
            keys.append(f"esc:{inner:#x}")
            nr = inner
    if nr == RM_CONTROL:
        cmd = walker.control_cmd(record)
        if cmd is not None:
            keys.append(f"ctrl:{cmd:#x}")
    elif nr in (RM_ALLOC, RM_ALLOC_MEMORY):
        cls = walker.alloc_class(record)
        if cls is not None:
            keys.append(f"{'class' if nr == RM_ALLOC else 'memclass'}:{cls:#x}")
    return keys


def read_uint(data: bytes | bytearray, leaf: Leaf) -> int:
    return int.from_bytes(data[leaf.offset:leaf.offset + leaf.size], "little")


def show_value(data: bytes | bytearray, leaf: Leaf) -> str:
    """A leaf's value as a difference prints it: numbers in hex, blobs as hex bytes (long ones cut)."""
    raw = bytes(data[leaf.offset:leaf.offset + leaf.size])
    if leaf.kind in ("bytes", "uuid", "char") or leaf.size > 8:
        text = raw.hex()
        return text if len(text) <= 40 else f"{text[:36]}...({leaf.size} bytes)"
    value = int.from_bytes(raw, "little", signed=leaf.kind == "int")
    return f"{value:#x}" if leaf.kind in ("uint", "ptr", "enum") and value > 9 else str(value)

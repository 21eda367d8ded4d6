"""Check a construct mirror against the C struct it mirrors, through DWARF.

A C header is the single definition of every structure rmtrace shares with C
(the record, the ring control page, the sema-service messages).  Each Python
mirror is a flat construct ``Struct``; ``compare`` lists every difference in
field names, order, offsets, sizes and kinds (signed or unsigned integer,
float, array and its element) between the two, and ``compare_constants`` the
differences between the header's constants and the mirror's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from construct import Array, Bytes, FormatField, SizeofError, Struct

from rmtrace.layout import Field, Layout

_FORMAT_KIND = {"b": "int", "h": "int", "i": "int", "l": "int", "q": "int",
                "B": "uint", "H": "uint", "I": "uint", "L": "uint", "Q": "uint",
                "e": "float", "f": "float", "d": "float", "?": "bool"}

C_KIND = {"ptr": "uint", "enum": "uint"}
"""C kinds a mirror spells as another: a pointer is an unsigned integer of its size, and an enum
without negative enumerators is unsigned int (gcc and clang, the x86-64 psABI)."""


@dataclass(frozen=True)
class MirrorField:
    """One field of a construct mirror, as ``compare`` sees it."""

    name: str
    offset: int
    size: int
    kind: str
    """uint, int, float, bool, struct (a nested ``Struct``) or array (``Bytes`` and ``Array``)."""
    elem_kind: str | None = None
    elem_size: int | None = None


def _field(sub: object, offset: int) -> MirrorField:
    name = getattr(sub, "name", None) or ""
    try:
        size = sub.sizeof()  # type: ignore[attr-defined]
    except SizeofError:
        size = 0  # a count decides it: a C flexible array member (T x[]) has size 0 in DWARF too
    node = sub
    while node is not None and not isinstance(node, FormatField | Bytes | Array | Struct):
        node = getattr(node, "subcon", None)
    if isinstance(node, Struct):  # a nested struct: its own mirror is compared with its own C struct
        return MirrorField(name, offset, size, "struct")
    if isinstance(node, FormatField):
        return MirrorField(name, offset, size, _FORMAT_KIND.get(node.fmtstr[-1], "?"))
    if isinstance(node, Bytes):
        return MirrorField(name, offset, size, "array", "bytes", 1)
    if isinstance(node, Array):
        return MirrorField(name, offset, size, "array", _field(node.subcon, 0).kind, node.subcon.sizeof())
    return MirrorField(name, offset, size, "?")


def mirror_fields(definition: Struct) -> list[MirrorField]:
    """Each field of a flat construct Struct, with its offset, size and kind."""
    fields, offset = [], 0
    for sub in definition.subcons:
        f = _field(sub, offset)
        fields.append(f)
        offset += f.size
    return fields


def _c_kind(kind: str | None) -> str | None:
    return C_KIND.get(kind, kind) if kind is not None else None


def _kind_problem(layout: str, c: Field, m: MirrorField) -> str | None:
    """Why a C member and its mirror field disagree in kind, or None."""
    c_kind = _c_kind(c.kind)
    if c_kind != m.kind:
        return f"{layout}.{c.name}: C {c.type} is {c_kind}, mirror is {m.kind}"
    if c.kind != "array":
        return None
    c_elem = _c_kind(c.elem_kind)
    if m.elem_kind == "bytes":  # Bytes(n): raw bytes, any one-byte integer or char element
        if c_elem not in ("uint", "int", "char") or (c.count and c.size // c.count != 1):
            return f"{layout}.{c.name}: C {c.type} is not bytes, mirror is Bytes"
        return None
    if c_elem != m.elem_kind:
        return f"{layout}.{c.name}: C elements are {c_elem}, mirror elements are {m.elem_kind}"
    if c.count and c.size // c.count != m.elem_size:
        return f"{layout}.{c.name}: C elements are {c.size // c.count} bytes, mirror elements {m.elem_size}"
    return None


def compare(layout: Layout, definition: Struct) -> list[str]:
    """Differences between a C layout and its construct mirror; empty when they agree."""
    problems = []
    py_fields = mirror_fields(definition)
    py_size = sum(f.size for f in py_fields)
    if layout.size != py_size:
        problems.append(f"{layout.name}: C size {layout.size}, mirror size {py_size}")
    c_names = [m.name for m in layout.fields]
    py_names = [f.name for f in py_fields]
    if c_names != py_names:
        problems.append(f"{layout.name}: C fields {c_names} != mirror fields {py_names}")
    for c, m in zip(layout.fields, py_fields):
        if c.name != m.name:
            continue
        if (c.offset, c.size) != (m.offset, m.size):
            problems.append(f"{layout.name}.{c.name}: C offset {c.offset} size {c.size}, "
                            f"mirror offset {m.offset} size {m.size}")
        kind = _kind_problem(layout.name, c, m)
        if kind:
            problems.append(kind)
    return problems


def compare_constants(header: Mapping[str, int], mirror: Mapping[str, int]) -> list[str]:
    """Differences between the header's constants (by macro name) and the mirror's values for them."""
    problems = []
    for name, value in mirror.items():
        if name not in header:
            problems.append(f"{name}: not defined by the header")
        elif header[name] != value:
            problems.append(f"{name}: header {header[name]:#x}, mirror {value:#x}")
    return problems

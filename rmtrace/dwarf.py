"""Struct layouts read from an object file's DWARF (pyelftools).

Used to check that construct mirrors match the C headers they mirror (the
record format, the ring and sema headers) and, by ``compile_probe``, to get
layouts of C structs without hand-copying offsets.  Handles typedef chains,
nested structs and unions, arrays (multi-dimensional too) and bitfields in
both the DWARF 4 (DW_AT_bit_offset, big-endian numbering) and DWARF 5
(DW_AT_data_bit_offset) encodings.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from elftools.elf.elffile import ELFFile

from rmtrace.errors import RmtraceError


@dataclass(frozen=True)
class Member:
    name: str
    offset: int
    size: int
    type: str
    bit_offset: int | None = None
    bit_size: int | None = None


@dataclass(frozen=True)
class StructLayout:
    name: str
    size: int
    members: tuple[Member, ...]
    kind: str = "struct"

    def member(self, name: str) -> Member:
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError(name)


_AGGREGATES = {"DW_TAG_structure_type": "struct", "DW_TAG_union_type": "union"}
_TRANSPARENT = {"DW_TAG_typedef", "DW_TAG_const_type", "DW_TAG_volatile_type", "DW_TAG_restrict_type",
                "DW_TAG_atomic_type"}


def _name(die) -> str | None:
    attr = die.attributes.get("DW_AT_name")
    return attr.value.decode() if attr else None


def _strip(die):
    while die.tag in _TRANSPARENT and "DW_AT_type" in die.attributes:
        die = die.get_DIE_from_attribute("DW_AT_type")
    return die


def type_name(die) -> str:
    """A readable C name for a type DIE (typedef names kept)."""
    if die is None:
        return "void"
    tag = die.tag
    name = _name(die)
    if tag in _AGGREGATES:
        return f"{_AGGREGATES[tag]} {name or '<anonymous>'}"
    if tag == "DW_TAG_enumeration_type":
        return f"enum {name or '<anonymous>'}"
    if tag == "DW_TAG_pointer_type":
        inner = die.get_DIE_from_attribute("DW_AT_type") if "DW_AT_type" in die.attributes else None
        return type_name(inner) + " *"
    if tag == "DW_TAG_array_type":
        return type_name(die.get_DIE_from_attribute("DW_AT_type")) + "".join(f"[{n}]" for n in array_dims(die))
    if tag in _TRANSPARENT and name is None:
        return type_name(die.get_DIE_from_attribute("DW_AT_type"))
    return name or tag


def array_dims(die) -> list[int]:
    dims = []
    for child in die.iter_children():
        if child.tag != "DW_TAG_subrange_type":
            continue
        if "DW_AT_count" in child.attributes:
            dims.append(child.attributes["DW_AT_count"].value)
        elif "DW_AT_upper_bound" in child.attributes:
            dims.append(child.attributes["DW_AT_upper_bound"].value + 1)
        else:
            dims.append(0)  # flexible array member
    return dims


def byte_size(die) -> int:
    die = _strip(die)
    if "DW_AT_byte_size" in die.attributes:
        return die.attributes["DW_AT_byte_size"].value
    if die.tag == "DW_TAG_array_type":
        n = 1
        for d in array_dims(die):
            n *= d
        return n * byte_size(die.get_DIE_from_attribute("DW_AT_type"))
    if die.tag == "DW_TAG_pointer_type":
        return die.cu.header["address_size"]
    raise RmtraceError(f"DWARF: no size for {type_name(die)}")


def _member(die, parent_kind: str) -> Member:
    attrs = die.attributes
    tdie = die.get_DIE_from_attribute("DW_AT_type")
    size = byte_size(tdie)
    if "DW_AT_data_member_location" in attrs:
        offset = attrs["DW_AT_data_member_location"].value
    else:
        offset = 0  # union members, and DWARF 5 bitfields (located by data_bit_offset)
    bit_offset = bit_size = None
    if "DW_AT_bit_size" in attrs:
        bit_size = attrs["DW_AT_bit_size"].value
        if "DW_AT_data_bit_offset" in attrs:  # DWARF 5: bits from the start of the struct
            absolute = attrs["DW_AT_data_bit_offset"].value
            offset = (absolute // (size * 8)) * size
            bit_offset = absolute - offset * 8
        else:  # DWARF 4: big-endian bit numbering within the storage unit
            storage = attrs.get("DW_AT_byte_size").value if "DW_AT_byte_size" in attrs else size
            bit_offset = storage * 8 - attrs["DW_AT_bit_offset"].value - bit_size
            size = storage
    return Member(_name(die) or "", offset, size, type_name(tdie), bit_offset, bit_size)


def _layout(die) -> StructLayout:
    kind = _AGGREGATES[die.tag]
    members = tuple(_member(c, kind) for c in die.iter_children() if c.tag == "DW_TAG_member")
    return StructLayout(_name(die) or "", die.attributes["DW_AT_byte_size"].value, members, kind)


def read_layouts(obj_path: str | os.PathLike, names: Iterable[str] | None = None) -> dict[str, StructLayout]:
    """Layouts of the named structs/unions (by tag name or typedef name) in an object file."""
    wanted = set(names) if names is not None else None
    found: dict[str, StructLayout] = {}
    with open(obj_path, "rb") as f:
        elf = ELFFile(f)
        if not elf.has_dwarf_info():
            raise RmtraceError(f"{obj_path}: no DWARF debug info (compile with -g)")
        for cu in elf.get_dwarf_info().iter_CUs():
            for die in cu.iter_DIEs():
                if die.tag == "DW_TAG_typedef" and "DW_AT_type" in die.attributes:
                    target = _strip(die)
                    key = _name(die)
                elif die.tag in _AGGREGATES:
                    target, key = die, _name(die)
                else:
                    continue
                if (not key or key in found or (wanted is not None and key not in wanted)
                        or target.tag not in _AGGREGATES or "DW_AT_byte_size" not in target.attributes):
                    continue
                found[key] = _layout(target)
    return found


def read_enums(obj_path: str | os.PathLike, names: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
    """Enumerators ({name: value}) of the named enum types in an object file."""
    wanted = set(names) if names is not None else None
    found: dict[str, dict[str, int]] = {}
    with open(obj_path, "rb") as f:
        for cu in ELFFile(f).get_dwarf_info().iter_CUs():
            for die in cu.iter_DIEs():
                key = _name(die)
                if die.tag != "DW_TAG_enumeration_type" or not key or (wanted is not None and key not in wanted):
                    continue
                found[key] = {_name(c): c.attributes["DW_AT_const_value"].value
                              for c in die.iter_children() if c.tag == "DW_TAG_enumerator"}
    return found


def _compile(source: str, include_dirs: Iterable[str | os.PathLike], cc: str, obj: Path) -> None:
    src = obj.with_suffix(".c")
    src.write_text(source)
    cmd = [cc, "-g", "-c", "-o", str(obj), str(src)] + [f"-I{d}" for d in include_dirs]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError:
        raise RmtraceError(f"{cc} not found: a C compiler is needed to read C layouts") from None
    if proc.returncode:
        raise RmtraceError(f"compiling the probe failed:\n{proc.stderr.strip()}")


def compile_probe_enums(source: str, names: Iterable[str], include_dirs: Iterable[str | os.PathLike] = (),
                        cc: str = "gcc") -> dict[str, dict[str, int]]:
    """Compile a C snippet with ``-g -c`` and return the enumerators of the enums ``names``."""
    names = list(names)
    with tempfile.TemporaryDirectory(prefix="rmtrace-dwarf-") as tmp:
        obj = Path(tmp) / "probe.o"
        _compile(source, include_dirs, cc, obj)
        enums = read_enums(obj, names)
    missing = [n for n in names if n not in enums]
    if missing:
        raise RmtraceError(f"no DWARF enum for: {', '.join(missing)}")
    return enums


def compile_probe(source: str, names: Iterable[str], include_dirs: Iterable[str | os.PathLike] = (),
                  cc: str = "gcc") -> dict[str, StructLayout]:
    """Compile a C snippet with ``-g -c`` and return the layouts of ``names``.

    The snippet must make the types reach the debug info, e.g. by declaring a
    variable of each (``struct rmt_record probe_record;``).
    """
    names = list(names)
    with tempfile.TemporaryDirectory(prefix="rmtrace-dwarf-") as tmp:
        obj = Path(tmp) / "probe.o"
        _compile(source, include_dirs, cc, obj)
        layouts = read_layouts(obj, names)
    missing = [n for n in names if n not in layouts]
    if missing:
        raise RmtraceError(f"no DWARF layout for: {', '.join(missing)}")
    return layouts

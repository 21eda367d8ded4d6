"""Struct layouts, enums and constant values read back from a compiled object's DWARF (pyelftools).

rmtrace's one DWARF reader.  It checks that construct mirrors match the C
headers they mirror (the record format, the ring and sema headers: see
``abi_check``), gets layouts of C structs without hand-copying offsets
(``compile_probe``), and reads NVIDIA's headers for the driver-profile
generator and user decoders.

``ObjectFacts(path)`` reads every type DIE of every compile unit once into
plain tuples (so that it pickles back from worker processes), then answers
``layouts(roots)``: the ``Layout`` of each named struct or union and,
recursively, of every struct or union its members use; ``enum(name)``; the
enumerators of every enum, anonymous ones included; and the 8-byte integer
constants the object defines (``symbols``, read from their section).

Naming: a struct is named by the typedef that names it directly (preferring
one equal to its tag), else by its tag; an anonymous nested struct is named
``Parent.member``.  Bitfields are read in both encodings: DWARF 5
``DW_AT_data_bit_offset`` (what gcc 11+ emits) and DWARF 2-4
``DW_AT_bit_offset`` counted from the storage unit's most significant bit.
"""

from __future__ import annotations

import os
import struct
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from rmtrace.errors import RmtraceError
from rmtrace.layout import Field, Layout

# DW_ATE_* base type encodings -> Field.kind
_ENCODING_KIND = {1: "ptr", 2: "bool", 3: "float", 4: "float", 5: "int", 6: "char", 7: "uint", 8: "uint", 0x10: "uint"}
# Typedefs that mean something more specific than their integer base type (NVIDIA's NvBool is an NvU8).
TYPEDEF_KIND = {"NvBool": "bool"}
_AGGREGATE_KIND = {"DW_TAG_structure_type": "struct", "DW_TAG_union_type": "union"}
_TRANSPARENT = ("DW_TAG_const_type", "DW_TAG_volatile_type", "DW_TAG_restrict_type", "DW_TAG_atomic_type")
_REF_FORMS = ("DW_FORM_ref1", "DW_FORM_ref2", "DW_FORM_ref4", "DW_FORM_ref8", "DW_FORM_ref_udata")
_ATTRS = ("DW_AT_name", "DW_AT_byte_size", "DW_AT_type", "DW_AT_data_member_location", "DW_AT_data_bit_offset",
          "DW_AT_bit_offset", "DW_AT_bit_size", "DW_AT_upper_bound", "DW_AT_count", "DW_AT_const_value",
          "DW_AT_encoding", "DW_AT_declaration")
_KEEP_TAGS = frozenset(("DW_TAG_base_type", "DW_TAG_typedef", "DW_TAG_pointer_type", "DW_TAG_array_type",
                        "DW_TAG_subrange_type", "DW_TAG_enumeration_type", "DW_TAG_enumerator",
                        "DW_TAG_member", "DW_TAG_subroutine_type", *_AGGREGATE_KIND, *_TRANSPARENT))


@dataclass(frozen=True)
class _Die:
    tag: str
    attrs: dict
    children: tuple[int, ...]


class ObjectFacts:
    """Types, enums and integer constants of one relocatable object."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.dies: dict[int, _Die] = {}
        self.typedefs: dict[str, int] = {}       # typedef name -> target offset
        self.tags: dict[str, int] = {}           # struct/union tag -> offset (definitions only)
        self.enum_types: dict[str, int] = {}     # enum tag or typedef name -> offset
        self.enumerators: dict[str, int] = {}
        self.symbols: dict[str, int] = {}        # integer constants by symbol name
        with open(path, "rb") as fh:
            elf = ELFFile(fh)
            if not elf.has_dwarf_info():
                raise RmtraceError(f"{os.fspath(path)}: no DWARF debug info (compile with -g)")
            self._read_dwarf(elf)
            self._read_symbols(elf)
        self._names = self._name_aggregates()

    # -- reading -----------------------------------------------------------------------------

    def _read_dwarf(self, elf: ELFFile) -> None:
        for cu in elf.get_dwarf_info().iter_CUs():
            base = cu.cu_offset
            for die in cu.iter_DIEs():
                if die.tag not in _KEEP_TAGS:
                    continue
                attrs = {}
                for name in _ATTRS:
                    attr = die.attributes.get(name)
                    if attr is None:
                        continue
                    value = attr.value
                    if attr.form in _REF_FORMS:
                        value += base
                    elif isinstance(value, bytes):
                        value = value.decode("utf-8", "replace")
                    attrs[name[6:]] = value
                children = tuple(c.offset for c in die.iter_children()) if die.has_children else ()
                self.dies[die.offset] = _Die(die.tag, attrs, children)
                self._index(die.offset, die.tag, attrs)

    def _index(self, offset: int, tag: str, attrs: dict) -> None:
        name = attrs.get("name")
        if tag == "DW_TAG_typedef" and name and "type" in attrs:
            self.typedefs.setdefault(name, attrs["type"])
        elif tag in _AGGREGATE_KIND and name and not attrs.get("declaration"):
            self.tags.setdefault(name, offset)
        elif tag == "DW_TAG_enumeration_type" and name and not attrs.get("declaration"):
            self.enum_types.setdefault(name, offset)
        elif tag == "DW_TAG_enumerator" and name:
            self.enumerators.setdefault(name, attrs.get("const_value", 0))

    def _read_symbols(self, elf: ELFFile) -> None:
        symtab = elf.get_section_by_name(".symtab")
        if not isinstance(symtab, SymbolTableSection):  # none (a stripped object), or not a symbol table
            return
        data_cache: dict[int, bytes] = {}
        for sym in symtab.iter_symbols():
            shndx = sym["st_shndx"]
            if sym["st_info"]["type"] != "STT_OBJECT" or not isinstance(shndx, int) or sym["st_size"] != 8:
                continue
            if shndx not in data_cache:
                data_cache[shndx] = elf.get_section(shndx).data()
            self.symbols[sym.name] = struct.unpack_from("<q", data_cache[shndx], sym["st_value"])[0]

    def _name_aggregates(self) -> dict[int, str]:
        names: dict[int, str] = {}
        for name, target in self.typedefs.items():
            die = self.dies.get(target)
            if die is None or die.tag not in _AGGREGATE_KIND:
                continue
            if target not in names or die.attrs.get("name") == name:
                names[target] = name
        for tag, offset in self.tags.items():
            names.setdefault(offset, tag)
        return names

    # -- queries -----------------------------------------------------------------------------

    def resolve(self, name: str) -> int | None:
        """The DIE offset of the struct/union/base type that ``name`` (a typedef or tag) ends at."""
        offset = self.typedefs.get(name, self.tags.get(name))
        return None if offset is None else self._strip(offset)[0]

    def layouts(self, roots: Iterable[str]) -> dict[str, Layout]:
        """Layouts of the named structs/unions and of every aggregate they contain."""
        out: dict[str, Layout] = {}
        for root in roots:
            offset = self.resolve(root)
            if offset is not None and self.dies[offset].tag in _AGGREGATE_KIND:
                self._layout(offset, self._names.get(offset, root), out)
        return out

    def layout_name(self, name: str) -> str | None:
        """The name under which ``layouts()`` files the aggregate that ``name`` refers to."""
        offset = self.resolve(name)
        if offset is None or self.dies[offset].tag not in _AGGREGATE_KIND:
            return None
        return self._names.get(offset, name)

    def aggregate_names(self) -> list[str]:
        """Every name (tag or typedef) that refers to a struct or union."""
        return [name for name in {**self.tags, **self.typedefs} if self.layout_name(name)]

    def size_of(self, name: str) -> int | None:
        offset = self.typedefs.get(name, self.tags.get(name))
        return None if offset is None else self._size(offset)

    def enum(self, name: str) -> dict[str, int] | None:
        """The enumerators ({name: value}) of the enum called ``name`` (its tag or a typedef of it)."""
        offset = self.enum_types.get(name)
        if offset is None and name in self.typedefs:
            offset = self._strip(self.typedefs[name])[0]
        die = self.dies.get(offset) if offset is not None else None
        if die is None or die.tag != "DW_TAG_enumeration_type":
            return None
        children = (self.dies[c] for c in die.children if c in self.dies)
        return {c.attrs["name"]: c.attrs.get("const_value", 0) for c in children if c.tag == "DW_TAG_enumerator"}

    # -- layout building ---------------------------------------------------------------------

    def _strip(self, offset: int) -> tuple[int, tuple[str, ...]]:
        """Follow typedefs and qualifiers; return the underlying DIE and the typedef names passed."""
        seen: list[str] = []
        while True:
            die = self.dies.get(offset)
            if die is None:
                return offset, tuple(seen)
            if die.tag == "DW_TAG_typedef":
                seen.append(die.attrs.get("name", ""))
            elif die.tag not in _TRANSPARENT:
                return offset, tuple(seen)
            if "type" not in die.attrs:  # e.g. const void
                return offset, tuple(seen)
            offset = die.attrs["type"]

    def _size(self, offset: int) -> int:
        base, _ = self._strip(offset)
        die = self.dies.get(base)
        if die is None:
            return 0
        if die.tag == "DW_TAG_array_type":
            dims = self._dims(die)
            count = 1
            for d in dims:
                count *= d
            return count * self._size(die.attrs["type"])
        return die.attrs.get("byte_size", 8 if die.tag == "DW_TAG_pointer_type" else 0)

    def _dims(self, die: _Die) -> tuple[int, ...]:
        dims = []
        for child in die.children:
            sub = self.dies.get(child)
            if sub is None or sub.tag != "DW_TAG_subrange_type":
                continue
            if "count" in sub.attrs and isinstance(sub.attrs["count"], int):
                dims.append(sub.attrs["count"])
            elif isinstance(sub.attrs.get("upper_bound"), int) and sub.attrs["upper_bound"] < 1 << 62:
                dims.append(sub.attrs["upper_bound"] + 1)
            else:
                dims.append(0)  # flexible array member
        return tuple(dims)

    def _kind(self, offset: int) -> str:
        base, typedefs = self._strip(offset)
        for name in typedefs:
            if name in TYPEDEF_KIND:
                return TYPEDEF_KIND[name]
        die = self.dies.get(base)
        if die is None:
            return "uint"
        if die.tag in _AGGREGATE_KIND:
            return _AGGREGATE_KIND[die.tag]
        if die.tag == "DW_TAG_base_type":
            encoding = die.attrs.get("encoding")
            kind = _ENCODING_KIND.get(encoding, "uint") if isinstance(encoding, int) else "uint"
            return "int" if kind == "char" and die.attrs.get("name") == "signed char" else kind
        return {"DW_TAG_pointer_type": "ptr", "DW_TAG_enumeration_type": "enum",
                "DW_TAG_array_type": "array", "DW_TAG_subroutine_type": "ptr"}.get(die.tag, "uint")

    def _type_name(self, offset: int, context: str, out: dict[str, Layout]) -> str:
        """How a member's type is written; an aggregate is named (and its layout built)."""
        die = self.dies.get(offset)
        if die is None:
            return "void"
        if die.tag == "DW_TAG_typedef":
            base, _ = self._strip(offset)
            if self.dies.get(base) is not None and self.dies[base].tag in _AGGREGATE_KIND:
                return self._layout(base, self._names.get(base, context), out)
            return die.attrs.get("name", "?")
        if die.tag in _TRANSPARENT:
            return self._type_name(die.attrs["type"], context, out) if "type" in die.attrs else "void"
        if die.tag in _AGGREGATE_KIND:
            return self._layout(offset, self._names.get(offset, context), out)
        if die.tag == "DW_TAG_pointer_type":
            target = die.attrs.get("type")
            return ("void" if target is None else self._pointee_name(target)) + "*"
        if die.tag == "DW_TAG_enumeration_type":
            return "enum " + die.attrs.get("name", context)
        if die.tag == "DW_TAG_subroutine_type":
            return "fn"
        return die.attrs.get("name", "?")

    def _pointee_name(self, offset: int) -> str:
        """A pointer's target, named without building its layout (pointers are not followed)."""
        die = self.dies.get(offset)
        if die is None:
            return "void"
        if die.tag in _TRANSPARENT:
            return self._pointee_name(die.attrs["type"]) if "type" in die.attrs else "void"
        if die.tag == "DW_TAG_pointer_type":
            return (self._pointee_name(die.attrs["type"]) if "type" in die.attrs else "void") + "*"
        return die.attrs.get("name") or self._names.get(offset, "?")

    def _layout(self, offset: int, name: str, out: dict[str, Layout]) -> str:
        if name in out:
            return name
        die = self.dies[offset]
        out[name] = Layout(name, die.attrs.get("byte_size", 0), (), _AGGREGATE_KIND[die.tag])  # cycle guard
        fields = tuple(self._member(self.dies[c], name, i, out)
                       for i, c in enumerate(die.children) if self.dies.get(c) and self.dies[c].tag == "DW_TAG_member")
        out[name] = Layout(name, die.attrs.get("byte_size", 0), fields, _AGGREGATE_KIND[die.tag])
        return name

    def _member(self, die: _Die, parent: str, index: int, out: dict[str, Layout]) -> Field:
        name = die.attrs.get("name", "")
        offset = _location(die.attrs.get("data_member_location", 0))
        context = f"{parent}.{name or index}"
        type_off = die.attrs["type"]
        size = self._size(type_off)
        base, _ = self._strip(type_off)
        base_die = self.dies.get(base)
        if base_die is not None and base_die.tag == "DW_TAG_array_type":
            dims = self._dims(base_die)
            elem_off = base_die.attrs["type"]
            elem = self._type_name(elem_off, context, out)
            count = 1
            for d in dims:
                count *= d
            return Field(name, offset, size, elem + "".join(f"[{d}]" for d in dims), "array",
                         count=count, dims=dims, elem=elem, elem_kind=self._kind(elem_off))
        type_name = self._type_name(type_off, context, out)
        kind = self._kind(type_off)
        if "bit_size" not in die.attrs:
            return Field(name, offset, size, type_name, kind)
        bits = die.attrs["bit_size"]
        if "data_bit_offset" in die.attrs:
            absolute = die.attrs["data_bit_offset"]
        else:  # DWARF 2-4: bit_offset counts from the most significant bit of the storage unit
            unit = die.attrs.get("byte_size", size)
            absolute = offset * 8 + unit * 8 - die.attrs.get("bit_offset", 0) - bits
        start = (absolute // (size * 8)) * size if size else absolute // 8
        if size == 0 or absolute - start * 8 + bits > size * 8:  # a packed bitfield straddles its unit
            start = absolute // 8
            size = (absolute % 8 + bits + 7) // 8
        return Field(name, start, size, type_name, kind, bit_offset=absolute - start * 8, bit_size=bits)


def _location(value) -> int:
    """DW_AT_data_member_location: a constant, or (DWARF 2) a DW_OP_plus_uconst expression."""
    if isinstance(value, int):
        return value
    if isinstance(value, list) and value and value[0] == 0x23:
        result, shift = 0, 0
        for byte in value[1:]:
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        return result
    return 0


# -- named lookups and probes ------------------------------------------------------------------

def read_layouts(obj_path: str | os.PathLike, names: Iterable[str] | None = None) -> dict[str, Layout]:
    """Layouts of the named structs/unions (by tag or typedef name; all when ``names`` is None),
    keyed by the name asked for.  The layouts of nested aggregates are left out."""
    facts = ObjectFacts(obj_path)
    wanted = list(names) if names is not None else facts.aggregate_names()
    built = facts.layouts(wanted)
    filed = {name: facts.layout_name(name) for name in wanted}
    return {name: built[key] for name, key in filed.items() if key is not None and key in built}


def read_enums(obj_path: str | os.PathLike, names: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
    """Enumerators ({name: value}) of the named enum types (all named enums when ``names`` is None)."""
    facts = ObjectFacts(obj_path)
    wanted = list(names) if names is not None else list(facts.enum_types)
    return {name: values for name in wanted if (values := facts.enum(name)) is not None}


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
    return _probe(source, names, include_dirs, cc, read_enums, "enum")


def compile_probe(source: str, names: Iterable[str], include_dirs: Iterable[str | os.PathLike] = (),
                  cc: str = "gcc") -> dict[str, Layout]:
    """Compile a C snippet with ``-g -c`` and return the layouts of ``names``.

    The snippet must make the types reach the debug info, e.g. by declaring a
    variable of each (``struct rmt_record probe_record;``).
    """
    return _probe(source, names, include_dirs, cc, read_layouts, "layout")


PROBE_CONSTANTS = "rmtrace_probe_constants"


def compile_probe_constants(header: str, macros: Iterable[str], include_dirs: Iterable[str | os.PathLike] = (),
                            cc: str = "gcc") -> dict[str, int]:
    """The values of integer macros of ``header``, as the compiler evaluates them, read back from DWARF.

    Each macro becomes an enumerator of a probe enum (``enum rmtrace_probe_constants``), so the
    value is the compiler's own (suffixes, arithmetic, other macros), not a reading of the text.
    """
    macros = list(macros)
    body = ",\n".join(f"    {PROBE_CONSTANTS}_{m} = ({m})" for m in macros)
    source = f'#include "{header}"\nenum {PROBE_CONSTANTS} {{\n{body}\n}} {PROBE_CONSTANTS}_v;\n'
    values = _probe(source, [PROBE_CONSTANTS], include_dirs, cc, read_enums, "enum")[PROBE_CONSTANTS]
    return {m: values[f"{PROBE_CONSTANTS}_{m}"] for m in macros}


def _probe(source: str, names: Iterable[str], include_dirs: Iterable[str | os.PathLike], cc: str,
           read: Callable[[Path, list[str]], dict[str, Any]], what: str) -> dict[str, Any]:
    """Compile the snippet in a scratch folder and ``read`` every one of ``names`` off its object file."""
    names = list(names)
    with tempfile.TemporaryDirectory(prefix="rmtrace-dwarf-") as tmp:
        obj = Path(tmp) / "probe.o"
        _compile(source, include_dirs, cc, obj)
        found = read(obj, names)
    missing = [n for n in names if n not in found]
    if missing:
        raise RmtraceError(f"no DWARF {what} for: {', '.join(missing)}")
    return found

"""construct definitions built from a driver profile's layouts.

As in construct's ``gallery/elf.py``, the definitions are made by factories
from the facts that vary (here: a profile's ``Layout`` of each struct), so no
decoder asks which driver version it decodes.  ``definitions(profile)`` gives
the per-profile cache; ``Definitions.struct(name)`` builds the construct
``Struct`` of a layout on first use (one ``"name" / Field`` per member) and
``Definitions.parser(name)`` the compiled form once a layout has proven hot.

How members map (the kinds are ``Field.kind``):

* ``uint``/``int``/``enum``/``bool``/``ptr``: little-endian integers of the
  member's size; ``float`` is kept as its bit pattern (an unsigned integer of
  its size) so every byte round-trips, and rendered as a float.
* ``char`` and byte-sized integer arrays: ``Bytes`` (rendered as text or hex).
* other scalar arrays: :class:`ScalarArray`, one ``struct`` call per array.
* struct members: the nested layout's ``Struct``; arrays of them:
  :class:`StructArray` (each distinct element parsed once, compiled).
* unions: ``SizedUnion(size, "_raw" / Bytes(size), members...)``: parsing reads every
  member from the same bytes, building writes ``_raw`` (exact bytes) when present.
* bitfields sharing a storage unit: one :class:`Bitfields` named ``_bits<offset>``.
* gaps between members (padding): ``"_pad<offset>" / Default(Bytes(n), zeros)``,
  so uninitialised padding in a capture rebuilds byte for byte.
* a flexible array member (``count == 0`` at the end): sized by the member
  its :class:`Flex` rule names, which becomes ``Rebuild(len_(flex) + bias)``;
  without a rule it is left out and the bytes after ``size`` stay raw.

Names starting with ``_`` are plumbing (padding, raw union bytes, bit units);
renderers show their contents, never their names.
"""

from __future__ import annotations

import copy
import io
import struct as _struct
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from construct import (
    Adapter,
    Array,
    Bytes,
    Construct,
    Container,
    Default,
    FormatField,
    ListContainer,
    Rebuild,
    SizeofError,
    Struct,
    Union,
    len_,
    this,
)
from construct.core import CodeGen
from rmtrace.decoders.profiles.model import DriverProfile

from rmtrace.errors import RmtraceError

_INT_CODES = {1: "B", 2: "H", 4: "L", 8: "Q"}
_SINT_CODES = {1: "b", 2: "h", 4: "l", 8: "q"}
SIGNED_KINDS = frozenset({"int"})
SCALAR_KINDS = frozenset({"uint", "int", "enum", "bool", "ptr", "float", "char"})

HOT_AFTER = 16
"""Parses of one layout before its compiled parser is built (compiling costs a few ms)..."""
BIG = 256
"""... except for layouts this big, which cost more to interpret once than to compile."""


def scalar(kind: str, size: int) -> Construct:
    """The construct integer for a scalar member (floats keep their bit pattern)."""
    codes = _SINT_CODES if kind in SIGNED_KINDS else _INT_CODES
    return FormatField("<", codes[size])


class ScalarArray(Construct):
    """``count`` little-endian integers read and written with one ``struct`` call.

    Equivalent to ``Array(count, FormatField("<", code))`` (tests check it against
    that), but an order of magnitude faster on the 64..256-entry arrays RM
    control params are full of.  Compiles to the same single call.
    """

    def __init__(self, count: int, code: str) -> None:
        super().__init__()
        self.count = count
        self.code = code
        self.codec = _struct.Struct(f"<{count}{code}")

    def _parse(self, stream: BinaryIO, context: Container, path: str) -> ListContainer:
        from construct.core import stream_read
        return ListContainer(self.codec.unpack(stream_read(stream, self.codec.size, path)))

    def _build(self, obj: Sequence[Any], stream: BinaryIO, context: Container, path: str) -> Sequence[Any]:
        from construct.core import stream_write
        stream_write(stream, self.codec.pack(*obj), self.codec.size, path)
        return obj

    def _sizeof(self, context: Container, path: str) -> int:
        return self.codec.size

    def _emitparse(self, code: CodeGen) -> str:
        name = f"scalar_array_{self.count}{self.code}"
        code.append(f"{name} = struct.Struct('<{self.count}{self.code}')")
        return f"ListContainer({name}.unpack(io.read({self.codec.size})))"

    def _emitbuild(self, code: CodeGen) -> str:
        name = f"scalar_array_{self.count}{self.code}"
        code.append(f"{name} = struct.Struct('<{self.count}{self.code}')")
        return f"(io.write({name}.pack(*obj)), obj)[1]"


class StructArray(Construct):
    """``count`` elements of a fixed-size struct, parsed by the element's compiled parser.

    Equivalent to ``Array(count, subcon)`` (tests check it), for the large
    arrays of structs RM params and UVM params carry (256 per-GPU attribute
    slots, 512 SM entries), most of whose elements are identical (unused,
    zero): each distinct element's bytes are parsed once and the value is
    shared by every element with those bytes.  Parsed values are read-only.
    """

    def __init__(self, count: int, subcon: Construct) -> None:
        super().__init__()
        self.count = count
        self.subcon = subcon
        self.size = subcon.sizeof()
        self._parser: Construct | None = None
        self._interpreted = 0
        """Distinct elements parsed by the element's construct itself: as ``Definitions.parse`` does, its
        compiled parser (a few ms to build) takes over once it is hot (most arrays hold a few distinct
        elements: 256 per-GPU slots, most of them unused)."""

    def _parse(self, stream: BinaryIO, context: Container, path: str) -> ListContainer:
        from construct.core import stream_read
        data = stream_read(stream, self.count * self.size, path)
        parser = self._parser or self.subcon
        seen: dict[bytes, Any] = {}
        out = ListContainer()
        size = self.size
        for start in range(0, len(data), size):
            chunk = data[start:start + size]
            value = seen.get(chunk)
            if value is None:
                if self._parser is None:
                    self._interpreted += 1
                    if self._interpreted > HOT_AFTER:
                        parser = self._parser = self.subcon.compile()
                value = seen[chunk] = parser.parse(chunk)
            out.append(value)
        return out

    def _build(self, obj: Sequence[Any], stream: BinaryIO, context: Container, path: str) -> Sequence[Any]:
        if len(obj) != self.count:
            raise RmtraceError(f"{path}: {len(obj)} elements, the array has {self.count}")
        for item in obj:
            self.subcon._build(item, stream, context, path)
        return obj

    def _sizeof(self, context: Container, path: str) -> int:
        return self.count * self.size


class Bitfields(Adapter):
    """The bitfields that share one storage unit, as a Container of their values.

    Bits no member covers are kept under ``_rest`` so the unit rebuilds exactly.
    """

    def __init__(self, size: int, members: tuple[tuple[str, int, int], ...]) -> None:
        super().__init__(scalar("uint", size))
        self.members = members  # (name, bit_offset from the unit's LSB, bit_size)
        covered = 0
        for _name, shift, bits in members:
            covered |= ((1 << bits) - 1) << shift
        self.rest_mask = ((1 << (8 * size)) - 1) & ~covered

    def _decode(self, obj: int, context: Container, path: str) -> Container:
        out = Container((name, (obj >> shift) & ((1 << bits) - 1)) for name, shift, bits in self.members)
        out["_rest"] = obj & self.rest_mask
        return out

    def _encode(self, obj: Mapping[str, int], context: Container, path: str) -> int:
        value = obj.get("_rest", 0) & self.rest_mask
        for name, shift, bits in self.members:
            value |= (obj[name] & ((1 << bits) - 1)) << shift
        return value


class SizedUnion(Union):
    """A C union: every member parsed from the same bytes, ``size`` bytes in all.

    construct's Union has no size (it builds from whichever member the value
    names); a C union always has one, and knowing it lets structs holding
    unions be sized, compiled and put in arrays.
    """

    def __init__(self, size: int, *subcons: Construct) -> None:
        super().__init__(0, *subcons)
        self.size = size

    def _sizeof(self, context: Container, path: str) -> int:
        return self.size


@dataclass(frozen=True)
class Flex:
    """How a flexible array member is sized: ``count`` (another member) elements of ``elem_size`` bytes.

    ``bias_is_size`` means ``count`` counts the struct's own bytes too (a header
    whose length field covers header and payload).  A flexible member has no
    size of its own in a layout, hence ``elem_size`` here.
    """

    count: str
    elem_size: int = 1
    bias_is_size: bool = False


class Definitions:
    """construct definitions of one profile's layouts, built and compiled on demand."""

    def __init__(self, layouts: Mapping[str, Any], flex: Mapping[str, Flex] | None = None) -> None:
        self.layouts = layouts
        self.flex = dict(flex or {})
        self._structs: dict[tuple[str, bool], Construct] = {}
        self._parsers: dict[tuple[str, bool], Any] = {}
        self._uses: dict[tuple[str, bool], int] = {}

    def layout(self, name: str) -> Any | None:
        return self.layouts.get(name)

    def struct(self, name: str, *, flex: bool = True) -> Construct:
        """The construct ``Struct`` (or ``Union``) of layout ``name``; KeyError if the profile lacks it.

        With ``flex`` a trailing flexible array member is included (sized by its
        :class:`Flex` rule); without, the definition covers exactly ``size`` bytes.
        """
        key = (name, flex)
        built = self._structs.get(key)
        if built is None:
            built = self._structs[key] = self._build(self.layouts[name], flex)
        return built

    def parse(self, name: str, data: bytes, *, flex: bool = True) -> tuple[Any, int]:
        """Parse ``data`` as layout ``name``: (value, bytes consumed).

        A fixed-size layout's compiled parser takes over once it is hot.
        Compiled construct code skips length checks, so a variable-size
        definition (a flexible member sized by a count the capture supplies)
        is always parsed interpreted, which checks every length.
        """
        key = (name, flex)
        parser = self._parsers.get(key)
        if parser is None:
            uses = self._uses[key] = self._uses.get(key, 0) + 1
            parser = self.struct(name, flex=flex)
            if (uses >= HOT_AFTER or self.layouts[name].size >= BIG) and _fixed_size(parser):
                parser = self._parsers[key] = parser.compile()
        stream = io.BytesIO(data)
        return parser.parse_stream(stream), stream.tell()

    def build_values(self, name: str, values: Mapping[str, Any], *, flex: bool = True) -> bytes:
        """The bytes of layout ``name`` with ``values`` set and every other member zero.

        Nested members take dicts (merged into their zero value) and arrays
        lists (laid over the start of the array), so a caller names only what
        it cares about: ``{"hClient": 1, "gpuInfoList": [{"index": 1}]}``.  A
        name the layout does not have is an RmtraceError.
        """
        zero, _ = self.parse(name, bytes(self.layouts[name].size), flex=flex)
        return self.struct(name, flex=flex).build(_merge(zero, values))

    def variant(self, name: str, overrides: Mapping[str, Callable[[Construct], Construct]], *,
                flex: bool = True) -> Construct:
        """Layout ``name`` with some members replaced: ``overrides[member](default) -> subcon``.

        For composite definitions (a queue element whose checksum and element
        count are rebuilt); not cached, the caller keeps what it builds.
        """
        return self._build(self.layouts[name], flex, overrides)

    # -- the factory ---------------------------------------------------------------------

    def _build(self, layout: Any, flex: bool,
               overrides: Mapping[str, Callable[[Construct], Construct]] | None = None) -> Construct:
        overrides = overrides or {}
        if layout.kind == "union":
            members = [self._member(f, i) for i, f in enumerate(layout.fields) if f.size]
            return SizedUnion(layout.size, "_raw" / Bytes(layout.size), *members)
        subcons: list[Construct] = []
        pos = 0
        fields = list(layout.fields)
        flex_field = fields[-1] if fields and _is_flex(fields[-1]) else None
        if flex_field is not None:
            fields.pop()
        units: dict[tuple[int, int], list] = {}
        for f in fields:
            if f.bit_size is not None:
                units.setdefault((f.offset, f.size), []).append(f)
        rule = self.flex.get(flex_field.name) if flex and flex_field is not None else None
        if rule is not None and not any(f.name == rule.count for f in fields):
            rule = None
        for index, f in enumerate(fields):
            if f.bit_size is not None:
                group = units.pop((f.offset, f.size), None)
                if group is None:
                    continue
                sub = f"_bits{f.offset}" / Bitfields(f.size, tuple((g.name, g.bit_offset, g.bit_size) for g in group))
            elif rule is not None and flex_field is not None and f.name == rule.count:
                bias = layout.size if rule.bias_is_size else 0
                sub = f.name / Rebuild(self._field(f), _flex_length(flex_field.name, bias))
            else:
                sub = self._member(f, index)
            if f.name in overrides:
                sub = f.name / overrides[f.name](sub.subcon)
            if f.offset > pos:
                subcons.append(_padding(pos, f.offset - pos))
            elif f.offset < pos:
                continue  # overlaps an earlier member (never in C structs, guard against odd DWARF)
            subcons.append(sub)
            pos = f.offset + f.size
        if layout.size > pos:
            subcons.append(_padding(pos, layout.size - pos))
        if rule is not None and flex_field is not None:
            bias = layout.size if rule.bias_is_size else 0
            subcons.append(flex_field.name / _flex_array(flex_field, rule, getattr(this, rule.count) - bias))
        return Struct(*subcons)

    def _member(self, f: Any, index: int = 0) -> Construct:
        return (f.name or f"anon{index}") / self._field(f)

    def _field(self, f: Any) -> Construct:
        if f.kind == "array":
            return self._array(f)
        if f.kind in ("struct", "union"):
            return self._nested(f.type, f.size)
        if f.size in _INT_CODES and f.kind in SCALAR_KINDS:
            return scalar(f.kind, f.size)
        return Bytes(f.size)

    def _nested(self, type_name: str, size: int) -> Construct:
        if type_name in self.layouts and self.layouts[type_name].size == size:
            return self.struct(type_name, flex=False)
        return Bytes(size)  # a layout the profile does not carry: bytes, never a guess

    def _element(self, f: Any) -> tuple[Construct, int]:
        size = f.size // f.count if f.count else 0
        if f.elem_kind in ("struct", "union"):
            return self._nested(f.elem, size), size
        if size in _INT_CODES and f.elem_kind in SCALAR_KINDS:
            return scalar(f.elem_kind, size), size
        return Bytes(size), size

    def _array(self, f: Any) -> Construct:
        dims = tuple(f.dims) or (f.count,)
        elem, size = self._element(f)
        if size == 1 and f.elem_kind in SCALAR_KINDS:
            inner: Construct = Bytes(dims[-1])
            dims = dims[:-1]
        elif size in _INT_CODES and f.elem_kind in SCALAR_KINDS:
            codes = _SINT_CODES if f.elem_kind in SIGNED_KINDS else _INT_CODES
            inner = ScalarArray(dims[-1], codes[size])
            dims = dims[:-1]
        else:
            inner = StructArray(dims[-1], elem) if _fixed_size(elem) else Array(dims[-1], elem)
            dims = dims[:-1]
        for d in reversed(dims):
            inner = Array(d, inner)
        return inner


def _merge(base: Any, values: Any) -> Any:
    """``values`` laid over a parsed zero value: dicts merge by key, lists from their start."""
    pairs = values.items() if isinstance(values, Mapping) else enumerate(values)
    for key, value in pairs:
        if isinstance(base, Mapping) and key not in base:
            members = ", ".join(k for k in base if not k.startswith("_"))
            raise RmtraceError(f"no field {key!r} (fields: {members})")
        current = base[key]
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            if not isinstance(base, Mapping):  # an array element: parsed values may be shared, so copy first
                current = base[key] = copy.deepcopy(current)
            _merge(current, value)
        elif isinstance(value, list) and isinstance(current, list) and len(value) <= len(current):
            _merge(current, value)
        else:  # a scalar, or a flexible array longer than its (empty) zero value
            base[key] = value
    return base


def _flex_array(f: Any, rule: Flex, count: Any) -> Construct:
    if rule.elem_size == 1:
        return Bytes(count)
    return Array(count, scalar(f.elem_kind if f.elem_kind in SCALAR_KINDS else "uint", rule.elem_size))


def _fixed_size(definition: Construct) -> bool:
    try:
        definition.sizeof()
    except SizeofError:
        return False
    return True


def _is_flex(f: Any) -> bool:
    return f.kind == "array" and f.count == 0


def _flex_length(name: str, bias: int) -> Any:
    return len_(getattr(this, name)) + bias if bias else len_(getattr(this, name))


def _padding(offset: int, n: int) -> Construct:
    return f"_pad{offset}" / Default(Bytes(n), bytes(n))


_CACHE: weakref.WeakKeyDictionary[Any, Definitions] = weakref.WeakKeyDictionary()


def definitions(profile: DriverProfile, flex: Mapping[str, Flex] | None = None) -> Definitions:
    """The (cached) definitions of ``profile``'s layouts."""
    defs = _CACHE.get(profile)
    if defs is None:
        defs = _CACHE[profile] = Definitions(profile.layouts, flex)
    elif flex:
        defs.flex.update(flex)
    return defs

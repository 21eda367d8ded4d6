"""Flat construct structs as the hot paths use them, every number derived from the definition.

rmtrace's binary layouts (the record, the chunk header, the file header and
footer, the ring control page) are each defined once as a flat construct
``Struct`` of little-endian scalars.  ``FlatStruct`` derives from that one
definition everything a fast reader or writer needs: one ``struct.Struct``
codec, each field's position in the codec's tuples (``index.source``) and its
byte offset, a named-tuple view, a keyword packer, and ``Scalar`` accessors
that read or write one field in place.  No offset, tuple position or format
character is written down twice.
"""

from __future__ import annotations

import struct
from collections import namedtuple
from collections.abc import Callable, Mapping
from operator import itemgetter
from typing import Any

from construct import Array, Bytes, Const, FormatField, Struct


def _leaf(sub: Any) -> Any:
    """The FormatField (or Bytes, or Array) under a field's wrappers (Const, Renamed)."""
    leaf = sub.subcon
    while not isinstance(leaf, FormatField | Bytes | Array):
        leaf = getattr(leaf, "subcon", None)
        if leaf is None:
            raise TypeError(f"field {sub.name} is not a plain scalar or byte string")
    return leaf


def _code(sub: Any) -> str:
    """The struct format character(s) of one field."""
    leaf = _leaf(sub)
    if isinstance(leaf, Bytes | Array):  # one item of the codec's tuples: the raw bytes
        return f"{sub.sizeof()}s"
    if leaf.fmtstr[0] != "<":
        raise TypeError(f"field {sub.name} is not little-endian")
    return leaf.fmtstr[1:]


def _const(sub: Any) -> Any:
    """The Const value of a field, or None."""
    node = sub.subcon
    while node is not None:
        if isinstance(node, Const):
            return node.value
        node = getattr(node, "subcon", None)
    return None


def struct_codec(definition: Struct) -> struct.Struct:
    """A ``struct.Struct`` with exactly the layout of a flat construct ``Struct``.

    Only fixed-size little-endian scalar fields (``FormatField``, possibly
    wrapped in ``Const``), ``Bytes`` and fixed ``Array``s (each one item of
    raw bytes) are allowed; anything else is a programming error.
    """
    codec = struct.Struct("<" + "".join(_code(sub) for sub in definition.subcons))
    if codec.size != definition.sizeof():
        raise TypeError(f"{definition} has padding or variable fields: codec {codec.size} != {definition.sizeof()}")
    return codec


def field_offset(definition: Struct, name: str) -> int:
    """Byte offset of a field in a flat, fixed-size construct Struct."""
    offset = 0
    for sub in definition.subcons:
        if sub.name == name:
            return offset
        offset += sub.sizeof()
    raise KeyError(name)


class Scalar:
    """One field of a flat struct: where it lies and its codec, to read or write it in place."""

    __slots__ = ("name", "offset", "codec")

    def __init__(self, name: str, offset: int, code: str) -> None:
        self.name = name
        self.offset = offset
        self.codec = struct.Struct("<" + code)

    def get(self, data: Any, base: int = 0) -> Any:
        """The field's value in the struct that starts at ``base`` of ``data``."""
        return self.codec.unpack_from(data, base + self.offset)[0]

    def put(self, data: Any, value: Any, base: int = 0) -> None:
        """Store ``value`` into the field (``data`` is writable: bytearray, mmap, memoryview)."""
        self.codec.pack_into(data, base + self.offset, value)

    def replaced(self, data: bytes, value: Any) -> bytes:
        """A copy of ``data`` with this field set to ``value``."""
        return data[:self.offset] + self.codec.pack(value) + data[self.offset + self.codec.size:]

    @property
    def end(self) -> int:
        return self.offset + self.codec.size


def _namedtuple(name: str, names: tuple[str, ...]) -> Any:
    """A namedtuple type of fields known only at run time (built from a definition)."""
    return namedtuple(name, names)


class FlatStruct:
    """A flat construct ``Struct`` with its derived codec, field positions and offsets."""

    def __init__(self, definition: Struct, name: str) -> None:
        self.definition = definition
        self.name = name
        self.codec = struct_codec(definition)
        self.size = self.codec.size
        self.names: tuple[str, ...] = tuple(sub.name for sub in definition.subcons)
        self.Fields: Any = _namedtuple(name, self.names)
        self.index = self.Fields._make(range(len(self.names)))
        """Each field's position in the codec's tuples: ``index.source``."""
        self.scalars: dict[str, Scalar] = {}
        offset = 0
        defaults: dict[str, Any] = {}
        for sub in definition.subcons:
            self.scalars[sub.name] = Scalar(sub.name, offset, _code(sub))
            offset += sub.sizeof()
            const = _const(sub)
            if const is not None:
                defaults[sub.name] = const
            elif sub.name.startswith("reserved"):
                defaults[sub.name] = bytes(sub.sizeof()) if isinstance(_leaf(sub), Bytes | Array) else 0
        self.defaults: Mapping[str, Any] = defaults
        """What ``pack`` writes for a field not given: its Const, or zero for a ``reserved*`` field."""

    def __getitem__(self, name: str) -> Scalar:
        return self.scalars[name]

    def offset(self, name: str) -> int:
        return self.scalars[name].offset

    def unpack(self, data: Any, offset: int = 0) -> Any:
        """The fields as a named tuple (``.magic``, ``.seq``, ...)."""
        return self.Fields._make(self.codec.unpack_from(data, offset))

    def pack(self, **values: Any) -> bytes:
        """The struct's bytes; every field not Const or reserved must be given, by name."""
        unknown = values.keys() - self.scalars.keys()
        if unknown:
            raise TypeError(f"{self.name} has no field {sorted(unknown)}")
        try:
            return self.codec.pack(*[values[n] if n in values else self.defaults[n] for n in self.names])
        except KeyError as exc:
            raise TypeError(f"{self.name}.pack: missing field {exc.args[0]}") from None

    def packer(self, *given: str, attrs: tuple[str, ...] = ()) -> Callable[..., bytes]:
        """A fast packer: ``packer("a", "b", attrs=("c",))(obj, a, b)`` packs ``a`` and ``b`` as given,
        ``c`` as ``obj.c``, and every other field as its default (Const, or zero when reserved).
        Without ``attrs`` there is no ``obj`` argument.

        Like ``collections.namedtuple``, it is generated source: one call of the codec with the
        arguments in the definition's order, as fast as a hand-written ``pack``."""
        named = set(given) | set(attrs)
        unknown = named - set(self.names)
        missing = [n for n in self.names if n not in named and n not in self.defaults]
        if missing or unknown or len(named) != len(given) + len(attrs):
            raise TypeError(f"{self.name}.packer: missing {missing}, unknown {sorted(unknown)}, given {given} {attrs}")
        scope = {"_pack": self.codec.pack, **{f"_d_{n}": v for n, v in self.defaults.items()}}
        values = ", ".join(n if n in given else f"obj.{n}" if n in attrs else f"_d_{n}" for n in self.names)
        params = ", ".join((("obj",) if attrs else ()) + given)
        exec(f"def packed({params}):\n    return _pack({values})\n", scope)  # noqa: S102
        return scope["packed"]

    def getter(self, *names: str) -> Callable[[tuple], tuple]:
        """The named fields, in that order, out of one of the codec's tuples."""
        positions = [self.names.index(n) for n in names]
        if len(positions) == 1:
            (only,) = positions
            return lambda values: (values[only],)
        return itemgetter(*positions)

    def prefix(self, last: str) -> struct.Struct:
        """A codec for the fields from the first one up to and including ``last``."""
        count = self.names.index(last) + 1
        return struct.Struct("<" + "".join(_code(sub) for sub in self.definition.subcons[:count]))

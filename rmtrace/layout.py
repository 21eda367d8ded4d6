"""A C struct's layout, as the DWARF reader gives it and driver profiles ship it.

Conventions of ``Field``:

* ``offset`` and ``size`` are in bytes.  ``type`` is the C type as the header
  declares the member: a scalar typedef stays named (``NvU32``, ``NvHandle``,
  ``NvP64``); a struct or union member names the ``Layout`` that describes it
  (in a driver profile, always a key of ``DriverProfile.layouts``); an array is
  written ``elem[d0][d1]...`` with ``elem`` and ``dims`` beside it.
* ``kind`` is one of ``KINDS``.  Arrays carry ``count`` (all dimensions
  multiplied), ``dims``, ``elem`` (a scalar type name or a layout name) and
  ``elem_kind``.  A flexible array member has ``count == 0`` and ``size == 0``.
* Bitfields: ``offset``/``size`` are the storage unit (the declared type's
  natural unit), ``bit_offset`` counts from that unit's least significant bit
  (x86-64 is little-endian), ``bit_size`` is the width.  Read ``size`` bytes at
  ``offset``, shift right by ``bit_offset``, mask ``bit_size`` bits.  A packed
  bitfield that crosses its unit is given by the bytes it spans.
* An anonymous struct/union member has the name ``""``.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("uint", "int", "float", "bool", "char", "ptr", "struct", "union", "array", "enum")


@dataclass(frozen=True)
class Field:
    name: str
    offset: int
    size: int
    type: str
    kind: str
    count: int = 1
    dims: tuple[int, ...] = ()
    elem: str | None = None
    elem_kind: str | None = None
    bit_offset: int | None = None
    bit_size: int | None = None


@dataclass(frozen=True)
class Layout:
    name: str
    size: int
    fields: tuple[Field, ...]
    kind: str = "struct"

    def field(self, name: str) -> Field:
        """The member called ``name``; KeyError if there is none."""
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} has no field {name!r}")

"""A profile as JSON, and back: the shipped ``data/<version>.json.zst`` files.

Rows are short lists rather than objects to keep the files small; a layout's
field is ``[name, offset, size, type, kind]`` plus, only where needed, an
object with ``dims``/``elem``/``elem_kind`` (arrays) and ``bits``
(``[bit_offset, bit_size]``, bitfields).  ``FORMAT`` changes when a reader of
the old form could misread the new one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import replace
from math import prod
from types import MappingProxyType
from typing import Any

import zstandard
from rmtrace.decoders.profiles.model import ClassInfo, Control, DriverProfile, Escape, Field, Layout, UvmCommand

from rmtrace.errors import RmtraceError

FORMAT = 1
ZSTD_LEVEL = 19


def _field_row(f: Field) -> list:
    row: list[Any] = [f.name, f.offset, f.size, f.type, f.kind]
    extra: dict[str, Any] = {}
    if f.kind == "array":
        extra.update(dims=list(f.dims), elem=f.elem, elem_kind=f.elem_kind)
    if f.bit_size is not None:
        extra["bits"] = [f.bit_offset, f.bit_size]
    if extra:
        row.append(extra)
    return row


def _field(row: list) -> Field:
    name, offset, size, type_, kind = row[:5]
    extra = row[5] if len(row) > 5 else {}
    dims = tuple(extra.get("dims", ()))
    bits = extra.get("bits") or (None, None)
    return Field(name, offset, size, type_, kind, count=prod(dims) if dims else 1, dims=dims,
                 elem=extra.get("elem"), elem_kind=extra.get("elem_kind"), bit_offset=bits[0], bit_size=bits[1])


def profile_to_dict(p: DriverProfile) -> dict:
    return {
        "format": FORMAT,
        "version": p.version,
        "branch": p.branch,
        "escapes": [[e.nr, e.name, e.struct, e.size, e.request, e.device] for e in p.escapes.values()],
        "classes": [[c.id, c.name, c.alloc_params] for c in p.classes.values()],
        "controls": [[c.cmd, c.name, c.params, c.size] for c in p.controls.values()],
        "uvm": [[u.nr, u.name, u.params, u.size] for u in p.uvm.values()],
        "status": [[code, name] for code, name in p.status.items()],
        "gsp_functions": [[n, name] for n, name in p.gsp_functions.items()],
        "gsp_events": [[n, name] for n, name in p.gsp_events.items()],
        "gsp_payloads": [[n, name] for n, name in p.gsp_payloads.items()],
        "constants": dict(p.constants),
        "engine_types": [[n, name] for n, name in p.engine_types.items()],
        "categories": [[cls, category, name] for (cls, category), name in p.categories.items()],
        "interface_prefixes": [[cls, prefix] for cls, prefix in p.interface_prefixes.items()],
        "aliases": {table: dict(names) for table, names in p.aliases.items()},
        "layouts": {name: [l.size, l.kind, [_field_row(f) for f in l.fields]]
                    for name, l in p.layouts.items() if l.name == name},
        # A typedef naming another typedef's struct: stored once, filed under both names.
        "layout_aliases": {name: l.name for name, l in p.layouts.items() if l.name != name},
    }


class _Layouts(Mapping[str, Layout]):
    """A profile's layouts by name, in name order, each built from its row when first looked up: a
    profile holds some 2,000 and a trace uses a few dozen, and building them all was half the start of
    every command that decodes (bench/cli_startup.py)."""

    def __init__(self, rows: dict, aliases: dict) -> None:
        self._rows, self._aliases = rows, aliases
        self._names = sorted({*rows, *aliases})
        self._built: dict[str, Layout] = {}

    def __getitem__(self, name: str) -> Layout:
        layout = self._built.get(name)
        if layout is None:
            if name in self._aliases:
                layout = replace(self[self._aliases[name]], name=name)
            else:
                size, kind, fields = self._rows[name]
                layout = Layout(name, size, tuple(_field(f) for f in fields), kind)
            self._built[name] = layout
        return layout

    def __contains__(self, name: object) -> bool:
        return name in self._rows or name in self._aliases

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _frozen(mapping: dict) -> MappingProxyType:
    return MappingProxyType(mapping)


def profile_from_dict(d: dict) -> DriverProfile:
    if d.get("format") != FORMAT:
        raise RmtraceError(f"profile format {d.get('format')!r} is not {FORMAT}: regenerate it with 'rmtrace profiles build'")
    return DriverProfile(
        version=d["version"],
        branch=d["branch"],
        escapes=_frozen({r[0]: Escape(*r) for r in d["escapes"]}),
        classes=_frozen({r[0]: ClassInfo(*r) for r in d["classes"]}),
        controls=_frozen({r[0]: Control(*r) for r in d["controls"]}),
        uvm=_frozen({r[0]: UvmCommand(*r) for r in d["uvm"]}),
        status=_frozen({code: name for code, name in d["status"]}),
        gsp_functions=_frozen({n: name for n, name in d["gsp_functions"]}),
        gsp_events=_frozen({n: name for n, name in d["gsp_events"]}),
        gsp_payloads=_frozen({n: name for n, name in d["gsp_payloads"]}),
        layouts=MappingProxyType(_Layouts(d["layouts"], d.get("layout_aliases", {}))),
        constants=_frozen(dict(d["constants"])),
        # Tables added after FORMAT 1 was first written: a profile built before them has none.
        engine_types=_frozen({n: name for n, name in d.get("engine_types", [])}),
        categories=_frozen({(cls, category): name for cls, category, name in d.get("categories", [])}),
        interface_prefixes=_frozen({cls: prefix for cls, prefix in d.get("interface_prefixes", [])}),
        aliases=_frozen({table: _frozen(dict(names)) for table, names in d.get("aliases", {}).items()}),
    )


def encode(p: DriverProfile) -> bytes:
    text = json.dumps(profile_to_dict(p), separators=(",", ":"))
    return zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(text.encode())


def decode(blob: bytes, origin: str) -> DriverProfile:
    try:
        return profile_from_dict(json.loads(zstandard.ZstdDecompressor().decompress(blob)))
    except (zstandard.ZstdError, ValueError, KeyError, TypeError) as exc:
        raise RmtraceError(f"{origin}: not a readable driver profile ({exc})") from None

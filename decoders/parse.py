"""Parsing a buffer against a profile layout, never raising, and peeking single fields.

``parse_buffer`` tries, in order: the whole layout (with its flexible array
member, if a rule sizes it), the fixed part with the tail kept raw, and raw
bytes; each fallback leaves a note saying why.  ``Peek`` reads one member at
a fixed offset with ``struct`` (the name level's only way into a buffer).

A buffer's parse depends on its layout and its bytes alone, and a trace holds
the same bytes again and again (an argument struct a call leaves as it was,
the same request a program makes in a loop), so ``parse_buffer`` keeps recent
outcomes in a ``ParseCache`` per ``Definitions`` (one per profile:
``parse_cache(defs)``), keyed by (layout name, bytes), and hands one value
to every caller.  So every parsed value is frozen (``freeze``: construct's
Containers and ListContainers made ``FrozenContainer`` and ``FrozenList``,
which refuse a change), hit or not: a caller that wants to change one changes
a copy (``thaw``), as the replayer does when it rewrites a record.
"""

from __future__ import annotations

import struct
import weakref
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from construct import Container, ListContainer
from rmtrace.decoders.base import DecodedBuffer
from rmtrace.decoders.structs import SIGNED_KINDS, Definitions

from rmtrace.lru import BoundedLRU
from rmtrace.record import Buffer, BufferFlag

HANDLE_TYPES = frozenset({"NvHandle"})
"""Member types whose values are RM object handles."""

HANDLE_ALIASES = {"hRoot": "hClient", "hObjectParent": "hParent", "hObjectNew": "hObject", "hObjectOld": "hObject"}
"""NVOS struct member names -> the names rmtrace shows (RM_ALLOC(hClient=…, hParent=…, hObject=…))."""

STATUS_FIELDS = ("status", "rmStatus", "Status")
"""Members that carry a call's NV_STATUS (RM NVOS structs, UVM params, GSP payloads; ``Status`` in
nv_ioctl_alloc_os_event_t and nv_ioctl_free_os_event_t)."""

_UNREADABLE, _TRUNCATED = int(BufferFlag.UNREADABLE), int(BufferFlag.TRUNCATED)  # plain ints: tested per buffer


def parse_buffer(defs: Definitions, layout_name: str | None, buf: Buffer, title: str | None = None) -> DecodedBuffer:
    """``buf`` decoded as layout ``layout_name`` as far as its bytes allow."""
    out = DecodedBuffer(buf.role, buf.when, buf.slot, buf.data, title=title or layout_name, layouts=defs.layouts)
    if buf.flags & _UNREADABLE:
        out.note = "the pointer could not be read"
        return out
    layout = defs.layout(layout_name) if layout_name else None
    if layout is None or layout_name is None:
        if layout_name:
            out.note = f"layout {layout_name} is not in the profile"
        return out
    data = buf.data
    cut = " (cut at the capture limit)" if buf.flags & _TRUNCATED else ""
    if len(data) < layout.size:
        out.note = f"{len(data)} bytes{cut}, {layout_name} is {layout.size}: kept raw"
        return out
    parsed = parse_cache(defs).parse(layout_name, data)
    if parsed.error is not None:
        out.note = f"not a {layout_name}: {parsed.error}"
        return out
    out.value, out.layout, used = parsed.value, layout, parsed.used
    if len(data) > used:
        out.note = f"{len(data) - used} bytes after the {used}-byte {layout_name}{cut}"
    return out


class Parsed(NamedTuple):
    """What parsing bytes as a layout gave: the value (frozen) and the bytes it used, or why no parse fits."""

    value: Any
    used: int
    error: str | None = None


def _parse_layout(defs: Definitions, layout_name: str, data: bytes) -> Parsed:
    """``data`` parsed as ``layout_name``: the whole layout, else its fixed part (a flexible
    member that does not fit), else the reason neither fits.  ``data`` holds at least the
    layout's fixed size.  Uncached (``ParseCache.parse`` caches it)."""
    try:
        value, used = defs.parse(layout_name, data)
    except Exception:  # noqa: BLE001 -- a flexible member that does not fit: retry without it
        try:
            value, used = defs.parse(layout_name, data[:defs.layouts[layout_name].size], flex=False)
        except Exception as exc:  # noqa: BLE001 -- bytes no layout fits stay raw, with the reason
            return Parsed(None, 0, str(exc))
    return Parsed(freeze(value), used)


PARSE_KEPT = 4096
"""Outcomes a ``ParseCache`` keeps (the most recently used).  The shipped capture of three CUDA
clients in a row has 2,551 distinct (layout, bytes) buffers in 6,264 parses."""
PARSE_KEPT_BYTES = 8 << 20
"""...and the buffer bytes they may hold in all (a parsed value takes some ten times its bytes)."""


class ParseCache(BoundedLRU[tuple[str, bytes], Parsed]):
    """Recent outcomes of ``_parse_layout`` for one ``Definitions``, by (layout name, bytes).

    The key is the layout's name and the buffer's bytes, within one profile's
    definitions (each has a cache of its own, so two profiles never share an
    entry); the outcome is a pure function of them, and its value is frozen,
    so every caller may be handed the same one.  Bounded: at most
    ``max_entries`` outcomes and ``max_bytes`` of buffers, the least recently
    used going first.  ``hits`` and ``misses`` count the lookups.
    """

    def __init__(self, defs: Definitions, max_entries: int | None = None, max_bytes: int | None = None) -> None:
        super().__init__(PARSE_KEPT if max_entries is None else max_entries,
                         PARSE_KEPT_BYTES if max_bytes is None else max_bytes)
        self.defs = defs

    def parse(self, layout_name: str, data: bytes) -> Parsed:
        """``data`` (at least the layout's fixed size) parsed as ``layout_name``: the whole layout, else its
        fixed part (a flexible member that does not fit), else why neither fits; from the cache when
        these bytes were parsed as this layout lately."""
        key = (layout_name, data if type(data) is bytes else bytes(data))
        kept = self.get(key)
        if kept is None:
            kept = _parse_layout(self.defs, layout_name, key[1])
            self.put(key, kept, len(key[1]))
        return kept


_CACHES: weakref.WeakKeyDictionary[Definitions, ParseCache] = weakref.WeakKeyDictionary()


def parse_cache(defs: Definitions) -> ParseCache:
    """The cache ``parse_buffer`` uses for ``defs`` (made on first use, gone with ``defs``)."""
    cache = _CACHES.get(defs)
    if cache is None:
        cache = _CACHES[defs] = ParseCache(defs)
    return cache


def parse_caches() -> list[ParseCache]:
    """Every ``parse_buffer`` cache alive (one per profile in use): for reports of their hit rates."""
    return list(_CACHES.values())


def _refuse(self: Any, *args: Any, **kwargs: Any) -> Any:
    raise TypeError(f"a parsed value is shared and read-only ({type(self).__name__}): change a copy, "
                    "rmtrace.decoders.parse.thaw(value)")


class FrozenContainer(Container):
    """A parsed struct that refuses changes (construct's Container otherwise: keys, attributes, equality)."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = move_to_end = __update__ = _refuse

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in Container.__slots__:  # construct's repr keeps a recursion lock in its slot
            _refuse(self)
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if name not in Container.__slots__:
            _refuse(self)
        object.__delattr__(self, name)

    def __reduce__(self) -> tuple[Any, ...]:
        return _frozen_container, (list(dict.items(self)),)


class FrozenList(ListContainer):
    """A parsed array that refuses changes (construct's ListContainer otherwise)."""

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return _frozen_list, (list(self),)


def _frozen_container(items: list[tuple[Any, Any]]) -> FrozenContainer:
    out = Container(items)
    object.__setattr__(out, "__class__", FrozenContainer)  # Container's own __setattr__ would make it a key
    return out


def _frozen_list(items: list[Any]) -> FrozenList:
    out = ListContainer(items)
    out.__class__ = FrozenList
    return out


_IMMUTABLE = frozenset({int, str, bytes, bool, float, type(None), FrozenContainer, FrozenList})


def freeze(value: Any) -> Any:
    """``value`` (a parse's result, fresh) with its Containers and ListContainers, all the way down,
    made FrozenContainer and FrozenList in place (the same objects: no copy); returns it."""
    kind = type(value)
    if kind in _IMMUTABLE:
        return value
    if kind is Container:
        object.__setattr__(value, "__class__", FrozenContainer)  # Container's own __setattr__ would make it a key
        for item in dict.values(value):
            if type(item) not in _IMMUTABLE:
                freeze(item)
    elif kind is ListContainer:
        value.__class__ = FrozenList
        for item in value:
            if type(item) not in _IMMUTABLE:
                freeze(item)
    return value


def thaw(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """A copy of a parsed value that may be changed: new Containers and ListContainers all the way
    down, the same numbers, strings and bytes.  An object found twice in ``value`` (the identical
    elements of a struct array share one value) is copied once, so it is shared in the copy too."""
    if type(value) in (int, str, bytes, bool, float, type(None)):
        return value
    if memo is None:
        memo = {}
    done = memo.get(id(value))
    if done is not None:
        return done
    if isinstance(value, dict):
        out: Any = Container()
        memo[id(value)] = out
        for key, item in dict.items(value):
            dict.__setitem__(out, key, thaw(item, memo))
        return out
    if isinstance(value, list):
        copied = ListContainer()
        memo[id(value)] = copied
        copied.extend(thaw(item, memo) for item in value)
        return copied
    return value


class Peek:
    """Reads one scalar member of a layout at its fixed offset (None when the buffer is too short)."""

    __slots__ = ("offset", "codec", "end")

    def __init__(self, layout: Any, name: str) -> None:
        f = layout.field(name)
        code = {1: "b", 2: "h", 4: "i", 8: "q"}[f.size]
        self.codec = struct.Struct("<" + (code if f.kind in SIGNED_KINDS else code.upper()))
        self.offset = f.offset
        self.end = f.offset + f.size

    def __call__(self, data: bytes) -> int | None:
        if len(data) < self.end:
            return None
        return self.codec.unpack_from(data, self.offset)[0]


def peek(layouts: Mapping[str, Any], layout_name: str | None, field: str) -> Peek | None:
    """A Peek for ``layout_name.field``, or None when the profile lacks either."""
    layout = layouts.get(layout_name) if layout_name else None
    if layout is None:
        return None
    try:
        return Peek(layout, field)
    except (KeyError, AttributeError):
        return None


def top_fields(layout: Any, value: Any, layouts: Mapping[str, Any] | None = None) -> Iterator[tuple[Any, Any]]:
    """(Field, value) of a parsed struct's members, bitfields flattened.

    With ``layouts``, members that are structs themselves (a wrapper such as
    NVOS02-with-fd, or rpc_free's NVOS00) are walked into as well.
    """
    for f in layout.fields:
        if f.bit_size is not None:
            unit = value.get(f"_bits{f.offset}")
            if unit is not None and f.name in unit:
                yield f, unit[f.name]
            continue
        if f.name not in value:
            continue
        inner = layouts.get(f.type) if layouts is not None and f.kind == "struct" else None
        if inner is not None and hasattr(value[f.name], "items"):
            yield from top_fields(inner, value[f.name], layouts)
        else:
            yield f, value[f.name]


def handles_of(layout: Any, value: Any, layouts: Mapping[str, Any] | None = None) -> dict[str, int]:
    """The handle members of a parsed struct, under the names rmtrace shows."""
    return {HANDLE_ALIASES.get(f.name, f.name): v for f, v in top_fields(layout, value, layouts)
            if f.type in HANDLE_TYPES}


def status_of(layout: Any, value: Any, layouts: Mapping[str, Any] | None = None) -> int | None:
    """The NV_STATUS member of a parsed struct, if it has one."""
    for f, v in top_fields(layout, value, layouts):
        if f.name in STATUS_FIELDS and isinstance(v, int):
            return v
    return None


def handle_values(layout: Any, value: Any, layouts: Mapping[str, Any]) -> Iterator[int]:
    """Every handle member's value in a parsed struct, nested structs and arrays of structs included."""
    for f in layout.fields:
        v = value.get(f.name) if f.name else None
        if v is None:
            continue
        if f.type in HANDLE_TYPES and isinstance(v, int):
            yield v
        elif f.kind == "struct" and f.type in layouts and hasattr(v, "items"):
            yield from handle_values(layouts[f.type], v, layouts)
        elif f.kind == "array" and f.elem in HANDLE_TYPES and isinstance(v, list):
            yield from (x for x in _flat(v) if isinstance(x, int))
        elif f.kind == "array" and f.elem_kind == "struct" and f.elem in layouts and isinstance(v, list):
            for item in _flat(v):
                yield from handle_values(layouts[f.elem], item, layouts)


def _flat(v: list) -> Iterator[Any]:
    for x in v:
        if isinstance(x, list):
            yield from _flat(x)
        else:
            yield x

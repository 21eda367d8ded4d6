"""Decoded records as text and JSON: the strace-like line, the field tree, plain values.

Presentation only: the decoders give values and layouts; this module decides
that a handle prints in hex, a char array as text, a float member (kept as
its bits) as a float, an NV_STATUS member with its name.  ``rmtrace show``
and the TUI both use it.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from rmtrace.decoders.base import Decoded, DecodedBuffer
from rmtrace.decoders.parse import HANDLE_TYPES, PARSE_KEPT, PARSE_KEPT_BYTES, STATUS_FIELDS

from rmtrace.calls import Call, CallState
from rmtrace.jsonschema import fragment
from rmtrace.lru import BoundedLRU
from rmtrace.record import Phase, Role, When, enum_name
from rmtrace.timefmt import format_duration, format_offset

HEX_TYPES = HANDLE_TYPES | {"NvP64", "NvV32"}
"""Member types shown in hex (handles, user pointers, RM's flag words)."""
ARRAY_PER_LINE = 8
HEX_WIDTH = 16
ELLIPSIS = "…"

StatusNamer = Callable[[int], str | None]


# -- plain values (JSON) ----------------------------------------------------------------------


def plain(value: Any, layout: Any = None, layouts: Mapping[str, Any] | None = None) -> Any:
    """``value`` as JSON-ready data: Containers as dicts (plumbing members left out), bytes as hex,
    char arrays as text, float members as floats; with ``layout`` each member by its type."""
    if type(value) in ATOMS:
        return value
    if layout is not None and hasattr(value, "items"):
        return _plain_struct(value, layout, layouts)
    if hasattr(value, "items"):
        return {k: plain(v) for k, v in value.items() if not str(k).startswith("_")}
    if isinstance(value, (list, tuple)):
        return list(value) if set(map(type, value)) <= ATOMS else _each(value, plain)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return value


ATOMS = frozenset({int, str, bool, float, type(None)})
"""Types ``plain`` gives back as they are (checked first: most values are numbers)."""
_ABSENT = object()


def _each(values: list[Any] | tuple[Any, ...], convert: Callable[[Any], Any]) -> list[Any]:
    """``[convert(x) for x in values]``, converting each distinct object once: the decoders share one
    value among identical array elements (256 per-GPU slots, most of them unused)."""
    ids = list(map(id, values))
    done = {key: convert(x) for key, x in dict(zip(ids, values)).items()}
    return list(map(done.__getitem__, ids))


def buffer_objects(buffers: Sequence[DecodedBuffer]) -> list[dict[str, Any]]:
    """Each buffer as its JSON object (``Decoded.to_dict``'s ``buffers``): where it was, what it holds,
    its value as plain data (by its layout) and its bytes in hex.  A buffer's object is a function of
    its place, title, note, layout and bytes alone, so one equal to a recent one (an argument struct the
    call left as it was; the same request a program makes again and again) is made once: the objects
    are kept in a small LRU (``BUFFERS_KEPT`` of them, ``BUFFERS_KEPT_BYTES`` of bytes), and shared, so
    they are never changed."""
    return [_kept(b)[2] for b in buffers]


def buffer_fragments(buffers: Sequence[DecodedBuffer], hexes: list[tuple[bytes, str]]) -> list[Any] | None:
    """Each buffer's object (``buffer_objects``) for a line that orjson writes: from the second time an
    object comes, the bytes ``jsonschema.encode`` writes for it, to be spliced in (``orjson.Fragment``, kept
    beside the object); the first time, the object itself, which orjson encodes with the line (most buffers
    of a trace as recorded come once: their fragments would encode each twice, once alone and once copied
    into the line).  None when a kept one is not what orjson writes alone (``jsonschema.fragment``): the
    caller encodes the plain objects then (as it does when the line it makes is not orjson's bytes).
    ``hexes`` gets each buffer's (bytes, hex) from its object: the call's records hold the same bytes."""
    out = []
    for b in buffers:
        kept = _kept(b)
        hexes.append((b.data, kept[2]["hex"]))
        encoded = kept[3]
        if encoded is _UNENCODED:
            kept[3] = _ONCE
            out.append(kept[2])
            continue
        if encoded is _ONCE:
            encoded = kept[3] = fragment(kept[2])
        if encoded is None:
            return None
        out.append(encoded)
    return out


_UNENCODED = object()
"""A kept object's fragment before a caller asked for it (show --json never does)."""
_ONCE = object()
"""...after ``buffer_fragments`` gave the object itself once."""


def _kept(b: DecodedBuffer) -> list[Any]:
    """``b``'s entry in ``BUFFER_OBJECTS``: [its layout, its layouts, its object, its fragment or
    ``_UNENCODED``], made and kept when no recent buffer was the same."""
    layout = b.layout
    if layout is None and b.value is not None:  # raw text or a list a decoder made: not by the bytes alone
        return [layout, b.layouts, _buffer_object(b), _UNENCODED]
    # by the ids of the layouts: the entry holds them (beside its object), so while it is kept no other
    # layout can take their ids
    data = b.data
    key = (id(layout), id(b.layouts), b.role, b.when, b.slot, b.title, b.note, data if type(data) is bytes else bytes(data))
    found = BUFFER_OBJECTS.get(key)
    if found is None:
        found = [layout, b.layouts, _buffer_object(b), _UNENCODED]
        BUFFER_OBJECTS.put(key, found, len(b.data))
    return found


def _buffer_object(b: DecodedBuffer) -> dict[str, Any]:
    place = (b.role, b.when, b.slot)
    names = _PLACES.get(place)
    if names is None:
        names = _PLACES[place] = (b.label, enum_name(Role, b.role), enum_name(When, b.when))
    return {"buffer": names[0], "role": names[1], "when": names[2], "slot": b.slot,
            "title": b.title, "layout": getattr(b.layout, "name", None), "fields": _fields(b), "note": b.note,
            "hex": hex_of(b.data)}


_PLACES: dict[tuple[int, int, int], tuple[str, str, str]] = {}
"""(role, when, slot) -> a buffer's label and its role's and when's names, made once (a trace has a few dozen)."""


_LAST_HEX: list[Any] = [b"", ""]
"""The bytes ``hex_of`` took last and their hex."""


def hex_of(data: bytes) -> str:
    """``data.hex()``, the last one's given again where the bytes are the same: a call's buffer before and
    after is most often as it was (a UVM_MAP_EXTERNAL_ALLOCATION's 9 KB params twice), and jsonl's records
    hold those bytes again (``jsonschema.record_buffer``'s ``hex_text``)."""
    last = _LAST_HEX
    if data == last[0]:
        return last[1]
    text = last[1] = data.hex()
    last[0] = data
    return text


def plain_args(d: Decoded) -> dict[str, Any]:
    """``plain(d.args)``, an argument that is a member of a buffer's parsed struct (the summary shows the
    params' members) taken from the fields of that buffer's object (``_kept``: made once, by ``buffer_objects``
    or here, kept) where its type makes ``plain`` the same with its layout as without (``_as_is``): that member
    made once, the same object in ``args`` and ``fields`` (jsonl encodes it once for both; a
    UVM_MAP_EXTERNAL_ALLOCATION's 256 per-GPU slots are most of its line)."""
    out: dict[str, Any] = {}
    for k, v in d.args.items():
        if str(k).startswith("_"):  # as plain leaves them out
            continue
        if type(v) in ATOMS:
            out[k] = v
            continue
        for b in d.buffers:
            value, layout = b.value, b.layout
            if layout is not None and hasattr(value, "get") and value.get(k) is v and _as_is(layout, b.layouts, k):
                out[k] = _kept(b)[2]["fields"][k]  # not _fields(b): its memo holds the last buffer's, not this one's
                break
        else:
            out[k] = plain(v)
    return out


_AS_IS: dict[tuple[int, int, str], tuple[Any, Any, bool]] = {}
"""``_as_is`` by the ids of the layout and layouts (kept beside the answer, so that the ids stay theirs) and the member."""


def _as_is(layout: Any, layouts: Mapping[str, Any] | None, name: str) -> bool:
    """Whether ``plain`` of member ``name`` of ``layout`` by the layout (``_plain_struct``) is ``plain`` of it
    without: no float, char array, bitfield, union or member named ``_...`` in its type, all the way down."""
    key = (id(layout), id(layouts), name)
    found = _AS_IS.get(key)
    if found is not None and found[0] is layout and found[1] is layouts:
        return found[2]
    fields = [f for f in layout.fields if f.name == name]
    answer = len(fields) == 1 and _member_as_is(fields[0], layouts or {})
    _AS_IS[key] = (layout, layouts, answer)
    return answer


def _member_as_is(f: Any, layouts: Mapping[str, Any]) -> bool:
    if f.bit_size is not None or not f.name or f.name.startswith("_") or f.kind in ("float", "union"):
        return False
    if f.kind == "struct":
        return _layout_as_is(layouts.get(f.type), layouts)
    if f.kind == "array":
        if f.elem_kind in ("char", "float", "union"):
            return False
        return f.elem_kind != "struct" or _layout_as_is(layouts.get(f.elem), layouts)
    return True


def _layout_as_is(layout: Any, layouts: Mapping[str, Any]) -> bool:
    """``_member_as_is`` for every member of ``layout`` (None: no layout, so ``plain`` takes the value as it is)."""
    if layout is None:
        return True
    return getattr(layout, "kind", None) != "union" and all(_member_as_is(f, layouts) for f in layout.fields)


def _fields(b: DecodedBuffer) -> Any:
    """``plain(b.value, b.layout, b.layouts)``, the last one's given again for the same parsed value: the parse
    cache hands one (frozen) value to every buffer of a layout and bytes, and the two buffers of a call that
    left its struct as it was (before and after, one after the other here) are two objects of one value, whose
    fields are then one object (jsonl encodes it once).  A value that comes again in a later call most often
    comes in a buffer ``BUFFER_OBJECTS`` keeps, whose object holds its fields."""
    value, layout, layouts = b.value, b.layout, b.layouts
    if layout is None:
        return plain(value, layout, layouts)
    last = _LAST_FIELDS
    if last[0] is value and last[1] is layout and last[2] is layouts:
        return last[3]
    found = plain(value, layout, layouts)
    last[:] = value, layout, layouts, found  # the entry holds what it is of: no other object takes their ids
    return found


_LAST_FIELDS: list[Any] = [None, None, None, None]
"""The value, layout and layouts ``_fields`` took last, and their plain value."""


BUFFERS_KEPT = 2 * PARSE_KEPT
"""Buffer objects ``buffer_objects`` keeps (the most recent): twice what the parse cache keeps, as a
buffer's copies before and after a call are two objects (their ``when`` differs) of one parse.  The
shipped capture of three CUDA clients in a row has some 4,400 distinct buffer objects in 5,031 records."""
BUFFERS_KEPT_BYTES = PARSE_KEPT_BYTES
"""...and the buffer bytes they may stand for in all.  What an entry takes is several times that: the object
holds the bytes twice in hex (and their fields), and once jsonl asks for it its encoded fragment holds the hex
again, so at this budget the cache's share of a process's memory is some tens of MB (jsonl's peak, docs/export.md)."""
BUFFER_OBJECTS: BoundedLRU[tuple[Any, ...], list[Any]] = BoundedLRU(BUFFERS_KEPT, BUFFERS_KEPT_BYTES)
"""``buffer_objects``' objects by their buffer, and its hits and misses (bench/export.py prints the rate)."""


def members(layout: Any, value: Any) -> Iterator[tuple[str, Any, Any]]:
    """(name, Field, value) of a parsed struct, in layout order; bitfields come out of their units."""
    for index, f in enumerate(layout.fields):
        if f.bit_size is not None:
            unit = value.get(f"_bits{f.offset}")
            if unit is not None and f.name in unit:
                yield f.name, f, unit[f.name]
            continue
        name = f.name or f"anon{index}"
        if name in value:
            yield name, f, value[name]


SCALAR, BITS, STRUCT, ARRAY, FLOAT = range(5)
"""How ``_plain_struct`` takes a member: as ``plain`` does, out of its bitfield unit, by its layout, ..."""
_PLANS: dict[int, tuple[Any, tuple[tuple[str, str, int, Any], ...], tuple[str, ...] | None]] = {}
"""Per layout (by id, the layout kept beside its plan so that the id stays its own): ``members`` worked out
once, and the members' names where every member is a plain scalar (most layouts: their values are taken
as they are)."""


def _plan(layout: Any) -> tuple[tuple[tuple[str, str, int, Any], ...], tuple[str, ...] | None]:
    """(name, key in the parsed value, how, Field) per member, in layout order, as ``members`` finds them;
    and the names alone when each member is a ``SCALAR`` under its own name, else None."""
    found = _PLANS.get(id(layout))
    if found is not None and found[0] is layout:
        return found[1], found[2]
    plan = []
    for index, f in enumerate(layout.fields):
        if f.bit_size is not None:
            plan.append((f.name, f"_bits{f.offset}", BITS, f))
            continue
        how = {"struct": STRUCT, "union": STRUCT, "array": ARRAY, "float": FLOAT}.get(f.kind, SCALAR)
        plan.append((f.name or f"anon{index}", f.name or f"anon{index}", how, f))
    scalars = tuple(name for name, _, _, _ in plan) if all(how == SCALAR for _, _, how, _ in plan) else None
    _PLANS[id(layout)] = (layout, tuple(plan), scalars)
    return tuple(plan), scalars


def _plain_struct(value: Any, layout: Any, layouts: Mapping[str, Any] | None) -> dict[str, Any]:
    """A parsed struct by its layout, each member (as ``members`` finds them) by its kind, the kinds
    worked out once per layout (jsonl converts every field of every call)."""
    get = value.get
    found = _PLANS.get(id(layout))  # _plan's lookup, here: a call less per struct
    plan, scalars = (found[1], found[2]) if found is not None and found[0] is layout else _plan(layout)
    if scalars is not None:  # one pass, as a comprehension: no member but numbers (or what plain makes of them)
        return {name: v if type(v) in ATOMS else plain(v) for name in scalars if (v := get(name, _ABSENT)) is not _ABSENT}
    out: dict[str, Any] = {}
    for name, key, how, f in plan:
        v = get(key, _ABSENT)
        if v is _ABSENT:
            continue
        if how == BITS:
            if v is None or name not in v:
                continue
            v = v[name]
            how = SCALAR
        if how == SCALAR:
            out[name] = v if type(v) in ATOMS else plain(v)
        elif how == STRUCT:
            out[name] = plain(v, (layouts or {}).get(f.type), layouts)
        elif how == ARRAY:
            out[name] = _plain_array(f, v, layouts)
        else:
            out[name] = _json_float(v, f.size)
    return out


def _plain_array(f: Any, v: Any, layouts: Mapping[str, Any] | None) -> Any:
    if isinstance(v, (bytes, bytearray)):
        return _text(v) if f.elem_kind == "char" else bytes(v).hex()
    if f.elem_kind in ("struct", "union"):
        inner = (layouts or {}).get(f.elem)

        def element(x: Any) -> Any:
            return plain(x, inner, layouts)
        if isinstance(v, list) and v and not isinstance(v[0], list):  # one dimension, the usual case
            return _each(v, element)
        done: dict[int, Any] = {}  # the decoders share one value among identical elements: convert it once

        def shared(x: Any) -> Any:
            found = done.get(id(x))
            if found is None:
                found = done[id(x)] = element(x)
            return found
        return _nested(v, shared)
    if f.elem_kind == "float":
        size = f.size // f.count if f.count else 4
        return _nested(v, lambda x: _json_float(x, size))
    return plain(v)


def _nested(v: Any, leaf: Callable[[Any], Any]) -> Any:
    return [_nested(x, leaf) for x in v] if isinstance(v, list) else leaf(v)


def _float(bits: int, size: int) -> float:
    return struct.unpack("<f" if size == 4 else "<d", bits.to_bytes(size, "little"))[0]


def _json_float(bits: int, size: int) -> float | None:
    """A float member as JSON: null for NaN and the infinities, which JSON has no number for (the
    member's bits are in its buffer's hex)."""
    value = _float(bits, size)
    return value if math.isfinite(value) else None


def _text(data: bytes | bytearray) -> str:
    return bytes(data).split(b"\0", 1)[0].decode("utf-8", "replace")


# -- one line ---------------------------------------------------------------------------------


def format_arg(name: str, value: Any, handles: Mapping[str, int]) -> str:
    """How a summary argument prints: handles and large numbers in hex, text quoted, aggregates elided."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:#x}" if name in handles or value > 0xFFFF else str(value)
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex() if len(value) <= 16 else bytes(value[:16]).hex() + ELLIPSIS
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_arg(name, v, handles) for v in value[:4]) + (", …]" if len(value) > 4 else "]")
    if hasattr(value, "items"):
        return "{" + ELLIPSIS + "}"
    return str(value)


def _quote(text: str, limit: int = 64) -> str:
    shown = text if len(text) <= limit else text[:limit] + ELLIPSIS
    return '"' + shown.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def summary(d: Decoded) -> str:
    """``NAME(arg=value, …, DETAIL{…})``: the call as strace would write it."""
    return summary_text(d.name, d.args, d.handles, d.detail, d.payload)


def summary_text(name: str, args: Mapping[str, Any], handles: Mapping[str, int], detail: str | None,
                 payload: bool) -> str:
    """``summary`` of a call given by its parts (show makes most lines from the call table's columns)."""
    parts = [f"{k}={format_arg(k, v, handles)}" for k, v in args.items()]
    if detail:
        parts.append(detail + ("{" + ELLIPSIS + "}" if payload else ""))
    return f"{name}({', '.join(parts)})"


def result(d: Decoded, call: Call | None, start_ns: int, end_ns: int | None = None) -> str:
    """`` = STATUS <duration>``, or what is known of a call that did not finish."""
    if call is None:  # a record on its own: what it says, nothing about time
        return f" = {d.status_name}" if d.status_name is not None else ""
    return outcome(d, call.state, call.first.time_ns, call.duration_ns, start_ns, end_ns)


def outcome(d: Decoded, state: CallState, first_ns: int, duration_ns: int | None, start_ns: int,
            end_ns: int | None = None) -> str:
    """``result`` of a call given by its state, the time of its first record and its duration (a call
    the call table's columns describe, with no records at hand)."""
    return outcome_text(d.status_name, state, first_ns, duration_ns, start_ns, end_ns)


def outcome_text(status_name: str | None, state: CallState, first_ns: int, duration_ns: int | None, start_ns: int,
                 end_ns: int | None = None) -> str:
    """``outcome`` of a call whose status is named ``status_name``."""
    if state is CallState.IN_FLIGHT:
        since = format_offset(first_ns - start_ns)
        held = f", {format_duration(end_ns - first_ns)} at the end" if end_ns is not None else ""
        return f" = ? <in flight since {since}{held}>"
    if state is CallState.UNFINISHED:
        return " <unfinished …>"
    text = ""
    if status_name is not None:
        text = f" = {status_name}"
    elif state in (CallState.COMPLETE, CallState.RESUMED):
        text = " = ?"
    if duration_ns is not None:
        text += f" <{format_duration(duration_ns)}>"
    return text


DIRECTIONS: dict[int, str] = {Phase.SEND: "→ ", Phase.RECV: "← ", Phase.EVENT: "· "}


def direction(call: Call | None) -> str:
    """A marker for messages that stand alone: ``→`` sent, ``←`` received, ``·`` host event."""
    return "" if call is None else direction_of(call.state, call.first.phase)


def direction_of(state: CallState, phase: int) -> str:
    """``direction`` of a call in ``state`` whose first record has ``phase``."""
    return DIRECTIONS.get(phase, "") if state is CallState.SINGLE else ""


def line(d: Decoded, call: Call, start_ns: int, end_ns: int | None = None) -> str:
    """One strace-like line: ``[pid/tid] +offset NAME(args) = STATUS <duration>``."""
    first = call.first
    return call_line(d, first.pid, first.tid, first.time_ns, first.phase, call.state, call.duration_ns,
                     start_ns, end_ns)


def call_line(d: Decoded, pid: int, tid: int, first_ns: int, phase: int, state: CallState,
              duration_ns: int | None, start_ns: int, end_ns: int | None = None) -> str:
    """``line`` of a call given by its first record's header fields, its state and its duration (as the
    call table's columns hold them: ``rmtrace show`` prints most calls from there, without their records)."""
    return line_text(d.name, summary(d), d.status_name, d.notes, pid, tid, first_ns, phase, state, duration_ns,
                     start_ns, end_ns)


def line_text(name: str, body: str, status_name: str | None, notes: Sequence[str], pid: int, tid: int,
              first_ns: int, phase: int, state: CallState, duration_ns: int | None, start_ns: int,
              end_ns: int | None = None) -> str:
    """``call_line`` of a call given by its name, its ``summary`` (``body``), its status's name and its
    notes: what show keeps of a call it has decoded once, or makes from the call table's columns."""
    head = f"[{pid}/{tid}] {format_offset(first_ns - start_ns)} "
    if state is CallState.RESUMED and phase in (Phase.EXIT, Phase.RECV):
        body = f"<… {name} resumed>"
    note = f"  # {notes[0]}" + (f" (+{len(notes) - 1} more)" if len(notes) > 1 else "") if notes else ""
    return head + direction_of(state, phase) + body + outcome_text(status_name, state, first_ns, duration_ns,
                                                                   start_ns, end_ns) + note


# -- the field tree ---------------------------------------------------------------------------


def tree(d: Decoded, status_name: StatusNamer | None = None, hex_dump: bool = True) -> list[str]:
    """Every buffer's fields, indented, each buffer with its bytes in hex (``show -V``)."""
    out: list[str] = []
    for note in d.notes:
        out.append(f"    # {note}")
    for buf in d.buffers:
        title = f" {buf.title}" if buf.title else ""
        out.append(f"    {buf.label}{title} ({len(buf.data)} bytes)" + (f"  # {buf.note}" if buf.note else ""))
        if buf.layout is not None and buf.value is not None:
            out.extend(_struct_lines(buf.layout, buf.value, buf.layouts or {}, 6, status_name))
        elif buf.value is not None and not isinstance(buf.value, (bytes, bytearray)):
            out.extend(_generic_lines(buf.value, 6))
        if hex_dump and buf.data:
            out.extend(hexdump(buf.data, 6))
    return out


def _struct_lines(layout: Any, value: Any, layouts: Mapping[str, Any], indent: int,
                  status_name: StatusNamer | None) -> Iterator[str]:
    pad = " " * indent
    for name, f, v in members(layout, value):
        if f.kind in ("struct", "union") and hasattr(v, "items"):
            inner = layouts.get(f.type)
            yield f"{pad}{name}: {f.type}"
            yield from (_struct_lines(inner, v, layouts, indent + 2, status_name) if inner is not None
                        else _generic_lines(v, indent + 2))
        elif f.kind == "array":
            yield from _array_lines(name, f, v, layouts, indent, status_name)
        else:
            yield f"{pad}{name} = {scalar_text(f, v, status_name)}"


def _array_lines(name: str, f: Any, v: Any, layouts: Mapping[str, Any], indent: int,
                 status_name: StatusNamer | None) -> Iterator[str]:
    pad = " " * indent
    if isinstance(v, (bytes, bytearray)):
        shown = _quote(_text(v)) if f.elem_kind == "char" else bytes(v).hex()
        yield f"{pad}{name} = {shown}"
        return
    flat = _flatten(v)
    if f.elem_kind in ("struct", "union"):
        inner = layouts.get(f.elem)
        for first, last, item in _runs(flat):
            index = f"{first}" if first == last else f"{first}..{last}"
            times = "" if first == last else f" (×{last - first + 1})"
            if inner is None:
                yield f"{pad}{name}[{index}] = {plain(item)}{times}"
            elif all(ff.kind not in ("struct", "union", "array") for ff in inner.fields):
                row = ", ".join(f"{n}={scalar_text(ff, x, status_name)}" for n, ff, x in members(inner, item))
                yield f"{pad}{name}[{index}] {{{row}}}{times}"
            else:
                yield f"{pad}{name}[{index}]:{times}"
                yield from _struct_lines(inner, item, layouts, indent + 2, status_name)
        return
    elem = _ElemField(f)
    pending: list[int] = []  # indexes of values not in a long run, printed ARRAY_PER_LINE a line
    for first, last, item in _runs(flat, min_run=ARRAY_PER_LINE):
        if first == last:
            pending.append(first)
            continue
        yield from _value_lines(pad, name, elem, flat, pending, status_name)
        pending = []
        yield f"{pad}{name}[{first}..{last}] {scalar_text(elem, item, status_name)} (×{last - first + 1})"
    yield from _value_lines(pad, name, elem, flat, pending, status_name)
    if not flat:
        yield f"{pad}{name} = []"


def _runs(items: list, min_run: int = 2) -> Iterator[tuple[int, int, Any]]:
    """(first, last, item) for each run of equal items at least ``min_run`` long, and each other item alone."""
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and (items[j + 1] is items[i] or items[j + 1] == items[i]):
            j += 1
        if j - i + 1 >= min_run:
            yield i, j, items[i]
        else:
            for k in range(i, j + 1):
                yield k, k, items[k]
        i = j + 1


def _value_lines(pad: str, name: str, elem: Any, flat: list, indexes: list[int],
                 status_name: StatusNamer | None) -> Iterator[str]:
    for at in range(0, len(indexes), ARRAY_PER_LINE):
        chunk = indexes[at:at + ARRAY_PER_LINE]
        yield f"{pad}{name}[{chunk[0]}:] " + ", ".join(scalar_text(elem, flat[i], status_name) for i in chunk)


class _ElemField:
    """An array's element, seen as a scalar member (for scalar_text)."""

    def __init__(self, f: Any) -> None:
        self.name = f.name
        self.kind = f.elem_kind
        self.type = f.elem
        self.size = f.size // f.count if f.count else 0


def _flatten(v: Any) -> list:
    if isinstance(v, list) and v and isinstance(v[0], list):
        return [x for row in v for x in _flatten(row)]
    return list(v)


def scalar_text(f: Any, v: Any, status_name: StatusNamer | None = None) -> str:
    """One member's value as the tree shows it."""
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if not isinstance(v, int):
        return str(plain(v))
    if f.kind == "float":
        return repr(_float(v, f.size))
    if f.kind == "bool":
        return "true" if v == 1 else "false" if v == 0 else str(v)
    if f.name in STATUS_FIELDS and status_name is not None:
        return f"{v:#010x} ({status_name(v)})"
    if f.type in HEX_TYPES or f.kind == "ptr" or v > 0xFFFF:
        return f"{v:#x}"
    return str(v)


def _generic_lines(value: Any, indent: int) -> Iterator[str]:
    pad = " " * indent
    data = plain(value)
    if isinstance(data, dict):
        for k, v in data.items():
            yield f"{pad}{k} = {v}"
    else:
        yield f"{pad}{data}"


def hexdump(data: bytes, indent: int = 0) -> Iterator[str]:
    """Offset, hex and text, 16 bytes a line; repeats of the line above are one ``*`` (as hexdump(1))."""
    pad = " " * indent
    previous, starred = None, False
    for off in range(0, len(data), HEX_WIDTH):
        row = data[off:off + HEX_WIDTH]
        if row == previous and off + HEX_WIDTH < len(data):
            if not starred:
                yield f"{pad}*"
                starred = True
            continue
        previous, starred = row, False
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in row)
        yield f"{pad}{off:04x}  {row.hex(' '):<{HEX_WIDTH * 3}} {text}"


__all__ = ["plain", "members", "summary", "summary_text", "result", "outcome", "outcome_text", "line", "call_line",
           "line_text", "tree", "hexdump", "scalar_text", "format_arg"]

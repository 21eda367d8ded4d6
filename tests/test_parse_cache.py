"""The parse cache: keyed by profile, layout and bytes, bounded, and its values frozen (a change needs a copy)."""

from __future__ import annotations

import pickle
import struct

import pytest
from construct import Container, ListContainer
from rmtrace.decoders import Level, render  # render imported here: made under a patched PARSE_KEPT, it keeps nothing
from rmtrace.decoders import parse as P
from rmtrace.decoders.context import context
from rmtrace.decoders.structs import Definitions

from rmtrace.export.jsonl import write_jsonl
from rmtrace.export.source import ExportInput
from rmtrace.layout import Field, Layout
from rmtrace.lru import BoundedLRU
from rmtrace.record import Buffer, Role, When
from tests.export_support import shipped

U32 = ("NvU32", "uint")


def _defs(first: str = "a") -> Definitions:
    """Two layouts over the same 8 bytes (two u32, or one u32 and an array of two u16) and one of 12."""
    pair = Layout("PAIR", 8, (Field(first, 0, 4, *U32), Field("b", 4, 4, *U32)))
    split = Layout("SPLIT", 8, (Field(first, 0, 4, *U32), Field("h", 4, 4, "NvU16", "array", count=2, dims=(2,),
                                                                   elem="NvU16", elem_kind="uint")))
    rows = Layout("ROWS", 12, (Field("r", 0, 12, "PAIR4", "array", count=3, dims=(3,), elem="PAIR4", elem_kind="struct"),))
    pair4 = Layout("PAIR4", 4, (Field("x", 0, 2, "NvU16", "uint"), Field("y", 2, 2, "NvU16", "uint")))
    return Definitions({"PAIR": pair, "SPLIT": split, "ROWS": rows, "PAIR4": pair4})


def _buf(data: bytes) -> Buffer:
    return Buffer(Role.ARG, When.BEFORE, data)


def test_the_same_bytes_as_the_same_layout_are_parsed_once_and_shared():
    defs = _defs()
    cache = P.parse_cache(defs)
    assert P.parse_cache(defs) is cache and len(cache) == 0
    data = struct.pack("<II", 7, 9)
    one = P.parse_buffer(defs, "PAIR", _buf(data))
    two = P.parse_buffer(defs, "PAIR", _buf(bytes(data)))  # equal bytes, another object
    assert (one.value.a, one.value.b) == (7, 9) and two.value is one.value
    assert (cache.hits, cache.misses, cache.hit_rate, len(cache)) == (1, 1, 0.5, 1)
    assert cache.parse("PAIR", data) == P.ParseCache(defs, max_entries=0).parse("PAIR", data)  # as if uncached
    assert P.parse_caches() and cache in P.parse_caches()


def test_layouts_and_profiles_never_share_an_entry():
    a, b = _defs("a"), _defs("z")  # two profiles: the same layout names, different members
    data = struct.pack("<II", 1, 0x00030002)
    pair, split = P.parse_buffer(a, "PAIR", _buf(data)).value, P.parse_buffer(a, "SPLIT", _buf(data)).value
    assert pair.b == 0x00030002 and list(split.h) == [2, 3]
    other = P.parse_buffer(b, "PAIR", _buf(data)).value
    assert other.z == 1 and "a" not in other and P.parse_cache(b) is not P.parse_cache(a)
    assert P.parse_cache(a).misses == 2 and P.parse_cache(b).misses == 1


def test_a_parsed_value_refuses_changes_and_a_thawed_copy_takes_them():
    defs = _defs()
    data = struct.pack("<6H", 1, 2, 1, 2, 5, 6)  # rows 0 and 1 are the same bytes: one shared value
    value = P.parse_buffer(defs, "ROWS", _buf(data)).value
    assert type(value) is P.FrozenContainer and type(value.r) is P.FrozenList and type(value.r[0]) is P.FrozenContainer
    assert isinstance(value, Container) and isinstance(value.r, ListContainer) and value.r[0] is value.r[1]
    for change in (lambda: value.__setitem__("r", []), lambda: setattr(value, "r", []), lambda: value.update(r=[]),
                   lambda: value.pop("r"), lambda: value.r.append(1), lambda: value.r.__setitem__(0, None),
                   lambda: value.r[2].__setitem__("x", 0), lambda: delattr(value.r[2], "y"), lambda: value.clear()):
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert repr(value) == repr(P.thaw(value))  # construct's repr (its recursion lock) still works
    assert pickle.loads(pickle.dumps(value)) == value and type(pickle.loads(pickle.dumps(value))) is P.FrozenContainer
    copy = P.thaw(value)
    assert type(copy) is Container and type(copy.r) is ListContainer and copy.r[0] is copy.r[1]
    copy.r[2].x = 99
    copy.r.append(Container(x=0, y=0))
    assert value.r[2].x == 5 and len(value.r) == 3
    assert P.parse_buffer(defs, "ROWS", _buf(data)).value.r[2].x == 5


def test_what_does_not_parse_is_cached_with_its_reason():
    defs = _defs()
    short = P.parse_buffer(defs, "PAIR", _buf(b"\x01\x02"))
    assert short.value is None and "kept raw" in short.note and P.parse_cache(defs).misses == 0  # too short: no parse
    longer = P.parse_buffer(defs, "PAIR", _buf(bytes(10)))
    again = P.parse_buffer(defs, "PAIR", _buf(bytes(10)))
    assert longer.note == again.note == "2 bytes after the 8-byte PAIR" and P.parse_cache(defs).hits == 1


def test_the_cache_is_bounded_by_entries_and_bytes_least_recently_used_first():
    defs = _defs()
    cache = P.ParseCache(defs, max_entries=3, max_bytes=20)
    blobs = [struct.pack("<II", n, n) for n in range(4)]
    for blob in blobs[:3]:
        cache.parse("PAIR", blob)
    assert (len(cache), cache.bytes) == (2, 16)  # a third 8-byte entry would pass 20 bytes
    cache.parse("PAIR", blobs[1])  # a hit: blobs[1] is now the most recent
    assert cache.hits == 1
    cache.parse("PAIR", blobs[3])
    cache.parse("PAIR", blobs[1])
    assert cache.hits == 2 and len(cache) == 2  # blobs[2] went, blobs[1] stayed
    cache.parse("PAIR", blobs[2])
    assert cache.misses == 5
    cache.clear()
    assert (len(cache), cache.bytes) == (0, 0)
    big = P.ParseCache(defs, max_entries=8, max_bytes=4)
    first = big.parse("PAIR", blobs[0])
    assert len(big) == 0 and big.parse("PAIR", blobs[0]) == first  # larger than the whole budget: never kept


def test_jsonl_is_the_same_with_the_cache_and_without(tmp_path, monkeypatch):
    path = shipped("cuda-streams-3x-sequential")
    outs = []
    for kept in (0, P.PARSE_KEPT):
        monkeypatch.setattr(P, "PARSE_KEPT", kept)
        P._CACHES.clear()  # the next decode makes its cache with this size
        out = tmp_path / f"kept-{kept}.jsonl"
        with ExportInput(path, progress=False) as src:
            write_jsonl(src, str(out))
            cache = P.parse_cache(context(src.decoders.profile).defs)
            outs.append((out.read_bytes(), cache.hits, cache.misses))
    (plain, hits_off, misses_off), (cached, hits_on, misses_on) = outs
    assert hits_off == 0 and hits_on > 0 and hits_on + misses_on == misses_off
    assert cached == plain


def test_every_decoded_value_of_a_capture_is_frozen():
    path = shipped("cuda-streams-2-together")
    with ExportInput(path, progress=False) as src:
        seen = 0
        for call in src.calls():
            for b in src.decoders.decode(call, Level.FULL).buffers:
                if b.layout is not None and isinstance(b.value, Container) and b.title == b.layout.name:
                    assert type(b.value) is P.FrozenContainer, b.title
                    seen += 1
        assert seen > 1000


def test_a_buffer_larger_than_the_kept_objects_may_hold_is_not_kept_and_pushes_nothing_out(monkeypatch):
    from rmtrace.decoders.base import DecodedBuffer

    monkeypatch.setattr(render, "BUFFER_OBJECTS", BoundedLRU(8, 16))
    layout = Layout("PAIR", 8, (Field("a", 0, 4, *U32), Field("b", 4, 4, *U32)))
    small = DecodedBuffer(Role.ARG, When.BEFORE, 0, bytes(8), layout=layout)
    big = DecodedBuffer(Role.ARG, When.BEFORE, 0, bytes(17), layout=layout)
    render.buffer_objects([small])
    render.buffer_objects([big])
    assert len(render.BUFFER_OBJECTS) == 1 and render.BUFFER_OBJECTS.bytes == 8  # the small one stayed, the big never came
    hits = render.BUFFER_OBJECTS.hits
    render.buffer_objects([small])
    assert render.BUFFER_OBJECTS.hits == hits + 1

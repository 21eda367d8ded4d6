"""JSON Lines: the call objects of ``rmtrace show --json`` (docs/json-schema.md), one a line, streamed.

The lines are the bytes ``jsonschema.encode`` writes for ``jsonschema.call``'s objects, put together
faster (``encoded_line``): each buffer's object, the bulk of a line (its bytes in hex, twice: decoded and
as recorded), is spliced in already encoded from the second time it comes, kept in a bounded cache by what
makes it (the first time, orjson encodes it with the line).

A call whose decode is a function of its records' bytes (``rmtrace.columns.memokey.memoizable``: ioctls
and system calls, as ``rmtrace show``'s memo keeps them) is kept as its line with holes where it says
which call it is (``VOLATILE_KEYS``: sequence numbers, times, pid, tid, call ids, the duration), keyed by what
show's memo keys by too (``memo_key``: its state, its records' bytes but those fields): a call made again
with the same bytes is written by filling the holes, neither decoded nor encoded again (``LineMemo``).
Nothing here imports numpy (a small trace's export would spend a fifth of its time on it).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson

from rmtrace import jsonschema
from rmtrace.calls import Call, CallState
from rmtrace.columns.memokey import VOLATILE_SPAN, memoizable
from rmtrace.decoders import DecoderSet, Level
from rmtrace.decoders.base import Decoded
from rmtrace.decoders.render import buffer_fragments
from rmtrace.export.source import ExportInput
from rmtrace.lru import BoundedLRU
from rmtrace.record import Buffer, Record

LINES_KEPT = 8192
"""Calls' line templates ``LineMemo`` keeps (the most recently used)."""
LINES_KEPT_BYTES = 16 << 20
"""...and the bytes of their keys and templates."""
LINE_KEPT_MAX = 64 << 10
"""The longest template kept (a UVM_MAP_EXTERNAL_ALLOCATION's line is 156 KB; nine in ten lines are under 4 KB)."""
_LINE_OPTIONS = jsonschema.ORJSON_OPTIONS | orjson.OPT_APPEND_NEWLINE


YOUNG_COLLECTED_AT = 10_000
"""Container objects made between two collections of the youngest generation while the lines are written (the
interpreter's default is 700): a line makes some hundred of them (its objects, its buffers' fields) and frees
them by their counts, while each collection walks what is young and every tenth the older generation too;
the decoders' parses leave cycles (construct's contexts and streams), so collections still run.  cachegrind,
cuda-streams-3x-sequential as recorded: its collections are 0.10G of the pass's 2.71G (the collector off), and
at this threshold the pass takes 0.036G less."""


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """The cyclic collector's first threshold at ``YOUNG_COLLECTED_AT`` for the block, as it was after."""
    thresholds = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTED_AT, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def write_jsonl(src: ExportInput, out: str) -> int:
    """Write every call of the trace as ``show --json`` does (``-`` is standard output); the objects written
    (with ``_fewer_collections``)."""
    with _fewer_collections():
        return _write(src, out)


def _write(src: ExportInput, out: str) -> int:
    n = 0
    if out == "-":
        for line in _lines(src):
            sys.stdout.write(line.decode("ascii"))
            n += 1
        return n
    with open(out, "wb", buffering=1 << 20) as f:  # lines of 6 KB on average: fewer, larger writes
        write = f.write
        for line in _lines(src):
            write(line)
            n += 1
    return n


def _lines(src: ExportInput, memo: LineMemo | None = None) -> Iterator[bytes]:
    """Each call's line, in order (``src.calls``' pairing), its records counted on ``src.progress``
    (``memo``: the lines kept, by default a fresh ``LineMemo``)."""
    decoders, start = src.decoders, src.start_ns
    memo = memo if memo is not None else LineMemo(decoders)
    stable: dict[int, bytes] = {}
    """seq -> a record of an operation the memo keeps, its bytes but its ``memokey.VOLATILE`` fields (its stable
    parts, ``memo_key``), until its call comes."""

    wants, wanted = memo.wants, memo.wanted

    def keep(view: memoryview, rec: Record) -> None:  # for every record: memo.wants' lookup inlined
        found = wanted.get(rec.source << 32 | rec.op)
        if found is None:
            found = wants(rec.source, rec.op)
        if found:
            stable[rec.seq] = b"".join((view[:_VOLATILE_START], view[_VOLATILE_END:]))

    for call in decoders.calls(src.records(keep)):
        parts = [part for part in (stable.pop(r.seq, None) for r in call.records) if part is not None]
        if len(parts) == len(call.records):
            yield memo.line(call, memo_key(call.state, parts), start)
        else:
            yield encoded_line(decoders.decode(call, Level.FULL), call, start)


_VOLATILE_START, _VOLATILE_END = VOLATILE_SPAN
_STATE_BYTES = {state: bytes((i,)) for i, state in enumerate(CallState)}


def memo_key(state: CallState, parts: list[bytes]) -> bytes:
    """A call's key in ``LineMemo``: its state, then its records' stable parts one after the other (a record but
    the header fields that say which call it is, ``memokey.VOLATILE``, which show's memo keys leave out too: the
    bytes before them and the bytes after; each record says its length, so the bytes one after the other are one key)."""
    return b"".join((_STATE_BYTES[state], *parts))


class LineMemo:
    """Lines of calls kept with holes for their ``VOLATILE_KEYS`` (``template``), by their ``memo_key``."""

    def __init__(self, decoders: DecoderSet, kept: int = LINES_KEPT, kept_bytes: int = LINES_KEPT_BYTES) -> None:
        self.decoders = decoders
        self.templates: BoundedLRU[bytes, bytes] = BoundedLRU(kept, kept_bytes)
        """key -> the template; ``_SEEN`` for a key that came once; b"" for a call whose line is not kept
        (not orjson's bytes, as ``encoded_line`` finds, or too long)."""
        self.wanted: dict[int, bool] = {}
        """source << 32 | op -> ``wants``' answer, as found."""
        self.filled = 0
        """Lines written from a template (neither decoded nor encoded, but for the template's making)."""

    def wants(self, source: int, op: int) -> bool:
        """Whether calls of (source, op) are kept (``memoizable``)."""
        key = source << 32 | op
        found = self.wanted.get(key)
        if found is None:
            found = self.wanted[key] = memoizable(self.decoders.op(source, op))
        return found

    def line(self, call: Call, key: bytes, start_ns: int) -> bytes:
        """``call``'s line (``encoded_line``'s bytes), ``key`` its ``memo_key``.  A template is made the
        second time a key comes (the first, only the key is kept): a trace whose calls do not come again
        makes none (their making holds a line's bytes several times over)."""
        made = self.templates.get(key)
        if made and made is not _SEEN:
            self.filled += 1
            return made % volatile(call, start_ns)
        decoded = self.decoders.decode(call, Level.FULL)
        if made is None:
            self.templates.put(key, _SEEN, len(key))
        elif made is _SEEN:
            made = template(decoded, call, start_ns) or b""
            # a line longer than LINE_KEPT_MAX is not kept: a few such calls would push out hundreds of others
            kept = made if len(made) <= LINE_KEPT_MAX else b""
            self.templates.put(key, kept, len(key) + len(kept))
            if made:
                self.filled += 1
                return made % volatile(call, start_ns)
        return encoded_line(decoded, call, start_ns)


def encoded_line(decoded: Decoded, folded: Call, start_ns: int) -> bytes:
    """``jsonschema.encode(jsonschema.call(decoded, folded, start_ns), newline=True)``, the same bytes,
    with the buffers' objects spliced in already encoded (``render.buffer_fragments``).
    Where a part is not what orjson writes alone, or the line is not what ``encode`` would take from
    orjson (text beyond ASCII), the plain object is encoded."""
    obj = _spliced(decoded, folded, start_ns)
    if obj is not None:
        try:
            line = orjson.dumps(obj, default=jsonschema.encode_default, option=_LINE_OPTIONS)
        except TypeError:
            pass
        else:
            if jsonschema.orjson_as_is(line):
                return line
    return jsonschema.encode(jsonschema.call(decoded, folded, start_ns), newline=True)


def _spliced(decoded: Decoded, folded: Call, start_ns: int) -> dict[str, Any] | None:
    """``jsonschema.call``'s object with its parts already encoded where they can be: the buffers' objects
    (``render.buffer_fragments``), and each value the object holds more than once (``_shared``); the records'
    buffers take the hex of the call's decoded buffer of the same bytes (``_record_buffers``).  None where a
    part is not what orjson writes alone."""
    hexes: list[tuple[bytes, str]] = []
    buffers = buffer_fragments(decoded.buffers, hexes)
    if buffers is None:
        return None
    obj = jsonschema.call(decoded, folded, start_ns, buffers, _record_buffers(hexes))
    return obj if _shared(obj) else None


SHARED_MIN = 256
"""The smallest buffer whose fields ``_shared`` encodes once: a smaller one's cost less to encode twice with
the line than to encode alone (a call of jsonschema.fragment, a copy of the buffer's object)."""
_SHARED_MIN_HEX = 2 * SHARED_MIN


def _shared(obj: dict[str, Any]) -> bool:
    """Encode once what a call's object holds twice: the fields of a buffer the call left as it was (its
    objects before and after hold one fields object: ``render._fields``) and a member of the params that is an
    argument too (``render.plain_args`` gives the fields' own), each then spliced in (``orjson.Fragment``)
    where it was, in buffers of ``SHARED_MIN`` bytes or more.  False where one is not what orjson writes alone
    (``jsonschema.fragment``)."""
    buffers = obj["buffers"]
    for b in buffers:  # most lines have none: a loop, not a comprehension's call
        if type(b) is dict and len(b["hex"]) >= _SHARED_MIN_HEX:
            break
    else:
        return True
    made = [b for b in buffers if type(b) is dict and len(b["hex"]) >= _SHARED_MIN_HEX]  # the rest came encoded
    fields: dict[int, Any] = {}
    twice: set[int] = set()
    for b in made:
        f = b["fields"]
        if type(f) is dict:
            if id(f) in fields:
                twice.add(id(f))
            fields[id(f)] = f
    args = obj["args"]
    members: dict[int, Any] = {}  # id -> an argument that is a member of a fields object
    for k, v in args.items():
        if type(v) is list or type(v) is dict:
            for f in fields.values():
                if f.get(k) is v:
                    members[id(v)] = v
                    twice.add(id(f))
                    break
    if not twice:
        return True
    encoded: dict[int, Any] = {}
    for key, v in members.items():
        encoded[key] = jsonschema.fragment(v)
    for key in twice:
        f = fields[key]
        if members:
            f = {k: encoded.get(id(v), v) for k, v in f.items()}
        encoded[key] = jsonschema.fragment(f)
    if None in encoded.values():
        return False
    if members:
        obj["args"] = {k: encoded.get(id(v), v) for k, v in args.items()}
    obj["buffers"] = [{**b, "fields": encoded[id(b["fields"])]} if type(b) is dict and id(b["fields"]) in encoded else b
                      for b in obj["buffers"]]
    return True


VOLATILE_KEYS = ("seq", "t_ns", "time_ns", "pid", "tid", "call_id")
"""The fields of a call's object, and of each of its records' objects, that say which call it is: in the
order the objects hold them, they are what ``volatile`` fills in (the call's duration after the call's)."""
_HOLE, _DURATION_HOLE = orjson.Fragment(b"\x00"), orjson.Fragment(b"\x01")
"""What orjson writes in no other place (it escapes control characters in text)."""
_CALL_HOLES = {**dict.fromkeys(VOLATILE_KEYS, _HOLE), "duration_ns": _DURATION_HOLE}
_RECORD_HOLES = dict.fromkeys(VOLATILE_KEYS, _HOLE)
_SEEN = b"seen"


def template(decoded: Decoded, folded: Call, start_ns: int) -> bytes | None:
    """``encoded_line``'s bytes with a ``%d`` for each of the ``VOLATILE_KEYS`` of the call and of its
    records and a ``%s`` for the duration (``bytes % volatile(call)`` fills them), or None where that line
    is not orjson's bytes."""
    obj = _spliced(decoded, folded, start_ns)
    if obj is None:
        return None
    obj.update(_CALL_HOLES)  # the keys are there: they keep their places
    for record in obj["records"]:
        record.update(_RECORD_HOLES)
    try:
        line = orjson.dumps(obj, default=jsonschema.encode_default, option=_LINE_OPTIONS)
    except TypeError:
        return None
    if (not jsonschema.orjson_as_is(line) or line.count(b"\x00") != len(VOLATILE_KEYS) * (1 + len(folded.records))
            or line.count(b"\x01") != 1):
        return None
    return line.replace(b"%", b"%%").replace(b"\x00", b"%d").replace(b"\x01", b"%s")


def volatile(call: Call, start_ns: int) -> tuple[int | bytes, ...]:
    """What ``template``'s holes hold for ``call``: its ``VOLATILE_KEYS`` and duration, then each record's."""
    first, duration = call.first, call.duration_ns
    values: list[int | bytes] = [first.seq, first.time_ns - start_ns, first.time_ns, first.pid, first.tid,
                                 first.call_id, b"null" if duration is None else b"%d" % duration]
    for r in call.records:
        values += (r.seq, r.time_ns - start_ns, r.time_ns, r.pid, r.tid, r.call_id)
    return tuple(values)


def _record_buffers(hexes: list[tuple[bytes, str]]) -> Callable[[Buffer], dict[str, Any]]:
    """``jsonschema.record_buffer`` for a call's records, each buffer's hex that of the call's decoded buffer of
    the same bytes (``hexes``: a record buffer's bytes are most often a decoded buffer's, the same object)."""
    def made(b: Buffer) -> dict[str, Any]:
        data = b.data
        for d, text in hexes:
            if d is data or d == data:
                return jsonschema.record_buffer(b, text)
        return jsonschema.record_buffer(b)
    return made

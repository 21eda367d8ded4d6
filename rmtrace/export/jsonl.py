"""JSON Lines: the call objects of ``rmtrace show --json`` (docs/json-schema.md), one a line, streamed.

The lines are the bytes ``jsonschema.encode`` writes for ``jsonschema.call``'s objects, put together
faster (``encoded_line``): each buffer's object, the bulk of a line (its bytes in hex, twice: decoded and
as recorded), is spliced in already encoded, kept in a bounded cache by what makes it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import orjson

from rmtrace import jsonschema
from rmtrace.calls import Call
from rmtrace.decoders import Level
from rmtrace.decoders.base import Decoded
from rmtrace.decoders.render import buffer_fragments
from rmtrace.export.source import ExportInput
from rmtrace.lru import BoundedLRU
from rmtrace.record import Buffer

RECORD_BUFFERS_KEPT = 8192
"""Encoded record buffers ``encoded_line`` keeps (the most recent; a program passes the same struct at the
same address again and again)."""
RECORD_BUFFERS_KEPT_BYTES = 8 << 20
"""...and the buffer bytes they stand for (an entry takes about three times that: the bytes in its key, and their hex, twice their size)."""
RECORD_BUFFERS: BoundedLRU[tuple[Any, ...], orjson.Fragment] = BoundedLRU(RECORD_BUFFERS_KEPT,
                                                                          RECORD_BUFFERS_KEPT_BYTES)
_LINE_OPTIONS = jsonschema.ORJSON_OPTIONS | orjson.OPT_APPEND_NEWLINE


def write_jsonl(src: ExportInput, out: str) -> int:
    """Write every call of the trace as ``show --json`` does (``-`` is standard output); the objects written."""
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


def _lines(src: ExportInput) -> Iterator[bytes]:
    decoders = src.decoders
    start = src.start_ns
    return (encoded_line(decoders.decode(call, Level.FULL), call, start) for call in src.calls())


def encoded_line(decoded: Decoded, folded: Call, start_ns: int) -> bytes:
    """``jsonschema.encode(jsonschema.call(decoded, folded, start_ns), newline=True)``, the same bytes,
    with the buffers' objects spliced in already encoded (``render.buffer_fragments``, ``RECORD_BUFFERS``).
    Where a part is not what orjson writes alone, or the line is not what ``encode`` would take from
    orjson (text beyond ASCII), the plain object is encoded."""
    buffers = buffer_fragments(decoded.buffers)
    if buffers is not None:
        try:
            line = orjson.dumps(jsonschema.call(decoded, folded, start_ns, buffers, _record_buffer_fragment),
                                default=jsonschema.encode_default, option=_LINE_OPTIONS)
        except TypeError:
            pass
        else:
            if jsonschema.orjson_as_is(line):
                return line
    return jsonschema.encode(jsonschema.call(decoded, folded, start_ns), newline=True)


def _record_buffer_fragment(b: Buffer) -> orjson.Fragment:
    """``jsonschema.record_buffer(b)`` encoded (numbers and hex: always what orjson writes), kept by what makes it."""
    data = b.data if type(b.data) is bytes else bytes(b.data)
    key = (b.role, b.when, b.flags, b.addr, b.orig_len, b.slot, data)
    found = RECORD_BUFFERS.get(key)
    if found is None:
        found = orjson.Fragment(orjson.dumps(jsonschema.record_buffer(b)))
        RECORD_BUFFERS.put(key, found, len(data))
    return found

"""JSON Lines: the call objects of ``rmtrace show --json`` (docs/json-schema.md), one a line, streamed."""

from __future__ import annotations

import sys
from collections.abc import Iterator

from rmtrace import jsonschema
from rmtrace.decoders import Level
from rmtrace.export.source import ExportInput


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
    return (jsonschema.call_line(decoders.decode(call, Level.FULL), call, start) for call in src.calls())

"""JSON Lines: the call objects of ``rmtrace show --json`` (docs/json-schema.md), one a line, streamed."""

from __future__ import annotations

import sys
from collections.abc import Iterator

from rmtrace import jsonschema
from rmtrace.decoders import Level
from rmtrace.export.source import ExportInput


def write_jsonl(src: ExportInput, out: str) -> int:
    """Write every call of the trace as ``show --json`` does (``-`` is standard output); the objects written."""
    if out == "-":
        return jsonschema.write_lines(_objects(src), sys.stdout)
    with open(out, "wb", buffering=1 << 20) as f:  # lines of 6 KB on average: fewer, larger writes
        return jsonschema.write_lines_binary(_objects(src), f)


def _objects(src: ExportInput) -> Iterator[jsonschema.JsonObject]:
    decoders = src.decoders
    start = src.start_ns
    return (jsonschema.call(decoders.decode(call, Level.FULL), call, start) for call in src.calls())

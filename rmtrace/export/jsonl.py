"""JSON Lines: the call objects of ``rmtrace show --json`` (docs/json-schema.md), one a line, streamed."""

from __future__ import annotations

import sys
from typing import TextIO

from rmtrace import jsonschema
from rmtrace.decoders import Level
from rmtrace.export.source import ExportInput


def write_jsonl(src: ExportInput, out: str) -> int:
    """Write every call of the trace as ``show --json`` does (``-`` is standard output); the objects written."""
    if out == "-":
        return _write(src, sys.stdout)
    with open(out, "w", encoding="utf-8") as f:
        return _write(src, f)


def _write(src: ExportInput, f: TextIO) -> int:
    decoders = src.decoders
    start = src.start_ns
    return jsonschema.write_lines((jsonschema.call(decoders.decode(call, Level.FULL), call, start)
                                   for call in src.calls()), f)

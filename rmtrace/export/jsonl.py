"""JSON Lines: the objects of ``rmtrace show --json``, one call a line, streamed to a file."""

from __future__ import annotations

from rmtrace.decoders import Level, render
from rmtrace.export.source import ExportInput


def write_jsonl(src: ExportInput, out: str) -> int:
    """Write every call of the trace as ``show --json`` prints it; returns the objects written."""
    decoders = src.decoders
    start = src.start_ns
    count = 0
    with open(out, "w", encoding="utf-8") as f:
        for call in src.calls():
            f.write(render.json_line(decoders.decode(call, Level.FULL), call, start) + "\n")
            count += 1
    return count

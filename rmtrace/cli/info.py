"""rmtrace info: what a trace holds, and whether it is whole."""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter

from rmtrace.cli.common import add_trace_argument, trace_or_default
from rmtrace.record import HEADER, MarkOp, Phase, Source, enum_name
from rmtrace.timefmt import format_duration
from rmtrace.trace import TraceReader

NAME = "info"
HELP = "metadata, record counts per source, time span, recovered/torn state"
DESCRIPTION = """\
Print a trace's metadata (host, kernel, driver, GPUs, command line, capture
backend), how many records it holds per source and phase, its time span and
processes, and whether it is complete or was recovered by scanning (a recorder
killed mid-write leaves no footer; rmtrace reads what is intact and says so).
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_trace_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--shipped", action="store_true", help="list the captures shipped with rmtrace instead")


def summarize(reader: TraceReader) -> dict:
    """Counts over record headers only (no buffer decoding)."""
    by_source: Counter = Counter()
    pids: set[int] = set()
    in_flight = 0
    unpack = HEADER.unpack_from
    for raw in reader.raw_records():
        h = unpack(raw)
        by_source[(h[4], h[5])] += 1
        pids.add(h[9])
        if h[4] == Source.MARK and h[12] == MarkOp.IN_FLIGHT:
            in_flight += 1
    sources: dict[str, dict[str, int]] = {}
    for (source, phase), n in sorted(by_source.items()):
        sources.setdefault(enum_name(Source, source), {})[enum_name(Phase, phase).lower()] = n
    span = reader.time_span
    return {
        "file": reader.path,
        "size": os.fstat(reader._fd).st_size,
        "meta": reader.meta,
        "complete": reader.recovery.complete,
        "recovery": reader.recovery.describe(),
        "records": reader.record_count,
        "chunks": len(reader.chunks),
        "time_span_ns": (span[1] - span[0]) if span else 0,
        "processes": sorted(pids),
        "sources": sources,
        "in_flight_at_stop": in_flight,
    }


def _print_text(s: dict) -> None:
    meta = s["meta"]
    rows = [
        ("file", f"{s['file']} ({s['size']:,} bytes)"),
        ("state", s["recovery"]),
        ("recorded", " ".join(str(x) for x in (meta.get("start_time", "?"), "on", meta.get("host", "?"),
                                                 f"(kernel {meta.get('kernel', '?')})",
                                                 f"backend {meta.get('backend', '?')}"))),
        ("driver", meta.get("driver_version") or "unknown"),
        ("gpus", ", ".join(str(g.get("name", g)) if isinstance(g, dict) else str(g) for g in meta.get("gpus", [])) or "none recorded"),
        ("command", " ".join(meta.get("command", [])) or "-"),
        ("records", f"{s['records']:,} in {s['chunks']} chunks"),
        ("time span", format_duration(s["time_span_ns"])),
        ("processes", f"{len(s['processes'])}" + (f" (pids {', '.join(map(str, s['processes'][:12]))}"
                                                     f"{', …' if len(s['processes']) > 12 else ''})" if s["processes"] else "")),
    ]
    for source, phases in s["sources"].items():
        total = sum(phases.values())
        detail = ", ".join(f"{p} {n:,}" for p, n in phases.items())
        rows.append((f"  {source}", f"{total:,} ({detail})"))
    if s["in_flight_at_stop"]:
        rows.append(("in flight", f"{s['in_flight_at_stop']} calls still in flight when recording stopped"))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


def _list_shipped() -> None:
    from rmtrace import captures
    for name in captures.shipped():
        with TraceReader(captures.path(name)) as reader:
            meta = reader.meta
            print(f"{name:<28} {reader.record_count:>6} records  driver {meta.get('driver_version', '?')}  "
                  f"{' '.join(meta.get('command', []))[:70]}")


def run(args: argparse.Namespace) -> int:
    if args.shipped:
        _list_shipped()
        return 0
    with TraceReader(trace_or_default(args)) as reader:
        summary = summarize(reader)
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        _print_text(summary)
    return 0

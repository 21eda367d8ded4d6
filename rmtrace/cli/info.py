"""rmtrace info: what a trace holds, where it came from, and whether it is whole."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rmtrace.cli.common import add_json_argument, add_trace_argument, trace_or_default
from rmtrace.errors import RmtraceError
from rmtrace.exitcodes import ExitCode

NAME = "info"
HELP = "metadata, record counts per source, time span, recovered/torn state"
DESCRIPTION = """\
Print a trace's metadata (host, kernel, driver, GPUs, command line, capture
backend), how many records it holds per source and phase, its time span and
processes, and whether it is complete or was recovered by scanning (a recorder
killed mid-write leaves no footer; rmtrace reads what is intact and says so).
For a replay or a reduced trace, what made it (where, when, against what) and
the recording it was made from.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_trace_argument(parser)
    add_json_argument(parser, "one info object (with --shipped, one per shipped capture)")
    parser.add_argument("--shipped", action="store_true", help="list the captures shipped with rmtrace instead")


def _print_text(s: dict[str, Any]) -> None:
    from rmtrace.timefmt import format_duration

    meta, rec, made = s["meta"], s["recorded"], s["made"]
    where = " ".join(str(x) for x in (rec["start_time"] or "?", "on", rec["host"] or "?",
                                      f"(kernel {rec['kernel'] or '?'})", f"backend {rec['backend'] or '?'}"))
    rows = [("file", f"{s['file']} ({s['size']:,} bytes)"), ("state", s["recovery"])]
    if made:
        against = ", ".join(x for x in (made["target"] and f"against {made['target']}",
                                        made["schedule"] and f"schedule {made['schedule']}") if x)
        rows += [("made by", f"{made['by']} {made['rmtrace_version'] or ''}".rstrip()
                  + f" on {made['host'] or '?'} (kernel {made['kernel'] or '?'}) at {made['time'] or '?'}"
                  + (f", {against}" if against else "")),
                 ("made from", made["from"] or "?"),
                 ("recording", where)]
    else:
        rows.append(("recorded", where))
    rows += [
        ("driver", meta.get("driver_version") or "unknown"),
        ("gpus", ", ".join(str(g.get("name", g)) if isinstance(g, dict) else str(g) for g in meta.get("gpus", []))
         or "none recorded"),
        ("command", " ".join(rec["command"]) or "-"),
        ("records", f"{s['records']:,} in {s['chunks']} chunks"),
        ("time span", format_duration(s["duration_ns"])),
        ("processes", f"{len(s['processes'])}" + (f" (pids {', '.join(map(str, s['processes'][:12]))}"
                                                     f"{', …' if len(s['processes']) > 12 else ''})"
                                                     if s["processes"] else "")),
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


def _list_shipped(as_json: bool) -> None:
    from rmtrace import captures, jsonschema
    from rmtrace.trace import TraceReader
    for name in captures.shipped():
        with TraceReader(captures.path(name)) as reader:
            if as_json:
                jsonschema.write_lines([jsonschema.info(reader)], sys.stdout)
                continue
            meta = reader.meta
            print(f"{name:<28} {reader.record_count:>6} records  driver {meta.get('driver_version', '?')}  "
                  f"{' '.join(meta.get('command', []))[:70]}")


def run(args: argparse.Namespace) -> int:
    if args.shipped:
        if args.trace is not None:
            raise RmtraceError("--shipped lists the shipped captures: give it no FILE")
        _list_shipped(args.json)
        return ExitCode.OK
    from rmtrace import jsonschema
    from rmtrace.trace import TraceReader
    with TraceReader(trace_or_default(args)) as reader:
        summary = jsonschema.info(reader)
    if args.json:
        jsonschema.write_lines([summary], sys.stdout)
    else:
        _print_text(summary)
    return ExitCode.OK

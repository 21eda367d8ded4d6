"""rmtrace show: the records of a trace, one line each (or JSON Lines)."""

from __future__ import annotations

import argparse

from rmtrace.cli.common import add_filter_arguments, add_trace_argument, filter_from_args, print_json_lines, trace_start
from rmtrace.record import Phase, Record, Role, Source, When, enum_name, record_to_dict
from rmtrace.timefmt import format_offset
from rmtrace.trace import TraceReader

NAME = "show"
HELP = "print records, one line each (--json for JSON Lines)"
DESCRIPTION = """\
Print the records of a trace in order, one line each: sequence, time since the
trace start, [pid/tid], source, phase, operation, fd, call id, result and the
buffers it carries.  --json prints every header field and every buffer (hex),
one JSON object per line, for other tools.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_trace_argument(parser)
    parser.add_argument("--json", action="store_true", help="JSON Lines: every field and buffer")
    add_filter_arguments(parser)


def raw_line(rec: Record, start: int) -> str:
    bufs = ", ".join(
        f"{enum_name(Role, b.role).lower()}/{enum_name(When, b.when).lower()} {len(b.data)}B" for b in rec.buffers)
    result = f" = {rec.ret}" + (f" (errno {rec.err})" if rec.err else "") if rec.phase == Phase.EXIT else ""
    return (f"{rec.seq:>8} {format_offset(rec.time_ns - start):>14} [{rec.pid}/{rec.tid}] "
            f"{enum_name(Source, rec.source)} {enum_name(Phase, rec.phase).lower()} op={rec.op:#x} "
            f"fd={rec.fd} call={rec.call_id}{result}" + (f" [{bufs}]" if bufs else ""))


def run(args: argparse.Namespace) -> int:
    with TraceReader(args.trace) as reader:
        start = trace_start(reader)
        records = reader.iter_filtered(filter_from_args(args, reader))
        if args.json:
            print_json_lines((record_to_dict(r) for r in records), args.limit)
            return 0
        for n, rec in enumerate(records):
            if args.limit is not None and n >= args.limit:
                break
            print(raw_line(rec, start))
        if not reader.recovery.complete:
            print(f"# {reader.recovery.describe()}")
    return 0

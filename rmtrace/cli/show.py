"""rmtrace show: the calls of a trace, strace-like, decoded for the trace's driver."""

from __future__ import annotations

import argparse
import sys

from rmtrace.cli.common import (
    add_filter_arguments,
    add_json_argument,
    add_trace_argument,
    filter_from_args,
    trace_or_default,
    trace_start,
)
from rmtrace.errors import RmtraceError
from rmtrace.record import Phase, Record, Role, Source, When, enum_name
from rmtrace.timefmt import format_offset
from rmtrace.trace import TraceReader

NAME = "show"
HELP = "print calls, one line each, decoded (strace-like); -V for every field, --json for tools"
DESCRIPTION = """\
Print the calls of a trace in order, one line each, as strace would: an enter
and its exit (a GSP request and its response) folded into one line with the
result and the time it took:

  [pid/tid] +12.345ms RM_ALLOC(hClient=0xc1d00001, hParent=…, hObject=…, HOPPER_CHANNEL_GPFIFO_A{…}) = NV_OK <241µs>

A call still in flight when the recording stopped ends '= ? <in flight since …>'.
Messages that stand alone are marked → (sent), ← (received), · (host event).
-V adds every buffer's field tree and bytes in hex; --json prints one JSON
object per call with every decoded field and the raw records (buffers in hex).
The driver profile comes from the trace's recorded driver version (--driver to
override).  Anything no profile names is shown raw with a note.  --raw prints
the records themselves, undecoded, one line each.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_trace_argument(parser)
    out = parser.add_argument_group("output")
    add_json_argument(parser, "a call object per call, every decoded field and the raw records (hex)", out)
    out.add_argument("-V", "--verbose", action="store_true", help="the full field tree of every buffer, with hex")
    out.add_argument("--raw", action="store_true", help="records undecoded, one line each")
    out.add_argument("--driver", metavar="VERSION", help="decode with this driver's profile, not the recorded one")
    add_filter_arguments(parser)
    group = parser.add_argument_group("call filters")
    group.add_argument("--name", metavar="GLOBS", help="operation or command names: RM_CONTROL,NV2080_CTRL_CMD_GPU_*,UVM_REGISTER_*")
    group.add_argument("--status", metavar="NAMES", help="only these results: NV_ERR_INVALID_ARGUMENT,NV_ERR_* or numbers")
    group.add_argument("--failed", action="store_true", help="only calls that failed")
    group.add_argument("--handle", metavar="HANDLES", help="only calls naming one of these handles (any handle field)")


def raw_line(rec: Record, start: int) -> str:
    bufs = ", ".join(
        f"{enum_name(Role, b.role).lower()}/{enum_name(When, b.when).lower()} {len(b.data)}B" for b in rec.buffers)
    result = f" = {rec.ret}" + (f" (errno {rec.err})" if rec.err else "") if rec.phase == Phase.EXIT else ""
    return (f"{rec.seq:>8} {format_offset(rec.time_ns - start):>14} [{rec.pid}/{rec.tid}] "
            f"{enum_name(Source, rec.source)} {enum_name(Phase, rec.phase).lower()} op={rec.op:#x} "
            f"fd={rec.fd} call={rec.call_id}{result}" + (f" [{bufs}]" if bufs else ""))


def _split(text: str | None) -> tuple[str, ...]:
    return tuple(p.strip() for p in (text or "").split(",") if p.strip())


def call_filter(args: argparse.Namespace):
    from rmtrace.decoders.filters import CallFilter
    try:
        handles = frozenset(int(h, 0) for h in _split(args.handle))
    except ValueError:
        raise RmtraceError(f"--handle: not a list of numbers: {args.handle!r}") from None
    return CallFilter(_split(args.name), _split(args.status), args.failed, handles)


def _show_raw(args: argparse.Namespace, reader: TraceReader) -> None:
    from rmtrace import jsonschema
    start = trace_start(reader)
    records = reader.iter_filtered(filter_from_args(args, reader))
    if args.json:
        jsonschema.write_lines((jsonschema.record(r, start) for r in records), sys.stdout, args.limit)
        return
    for n, rec in enumerate(records):
        if args.limit is not None and n >= args.limit:
            break
        print(raw_line(rec, start))


def run(args: argparse.Namespace) -> int:
    from rmtrace import jsonschema
    from rmtrace.decoders import Level, decoders_for, render
    with TraceReader(trace_or_default(args)) as reader:
        if args.raw:
            _show_raw(args, reader)
        else:
            decoders = decoders_for(reader, override=args.driver)
            if decoders.warning:
                print(f"rmtrace show: {decoders.warning}", file=sys.stderr)
            wanted = call_filter(args)
            level = max(wanted.level, Level.FULL if args.verbose or args.json else Level.CALL)
            span = reader.time_span
            start, end = span if span else (0, None)
            status_name = decoders.profile.status.get
            out = sys.stdout
            shown = 0
            for call in decoders.calls(reader.iter_filtered(filter_from_args(args, reader))):
                if args.limit is not None and shown >= args.limit:
                    break
                if not wanted.wants_label(decoders.label(call.first)):
                    continue
                decoded = decoders.decode(call, level)
                if not wanted.wants(decoded):
                    continue
                shown += 1
                if args.json:
                    out.write(jsonschema.dumps(jsonschema.call(decoded, call, start)) + "\n")
                    continue
                out.write(render.line(decoded, call, start, end) + "\n")
                if args.verbose:
                    for text in render.tree(decoded, status_name):
                        out.write(text + "\n")
        if not reader.recovery.complete:
            print(f"# {reader.recovery.describe()}", file=sys.stderr if args.json else sys.stdout)
    return 0

"""rmtrace export: a trace as pcapng (with a Wireshark dissector), Perfetto, JSON Lines or a Parquet dataset."""

from __future__ import annotations

import argparse
import os
import sys

from rmtrace.errors import RmtraceError

NAME = "export"
COLUMNS = True  # reads the call table: numpy loaded with one BLAS thread (cli/main.py)
HELP = "write a trace for Wireshark (pcapng + dissector), Perfetto, JSON Lines or a Parquet dataset"
DESCRIPTION = """\
Write a trace in a format other tools read:

  pcapng    one packet per record, one interface per source (DLT_USER0...), ns
            timestamps, pid/tid and the decoded one-line summary as comments;
            --dissector DIR writes the Lua dissector for the trace's driver
            profile:  tshark -X lua_script:DIR/rmtrace.lua -r OUT.pcapng
  perfetto  a trace ui.perfetto.dev opens: calls per process and thread,
            channel and CE-rank states, flows from a GSP request to its
            response and from a call to the sema completion that released it,
            the host counters; a call in flight at the end runs to the end
  jsonl     the objects of 'rmtrace show --json', one a line
  parquet   one table of calls; several FILEs (from many hosts) go into one
            dataset directory partitioned by host and day, which
            'rmtrace query' (DuckDB), Spark or Trino read

Every format streams and shows its progress on a terminal.  Memory grows
slowly with the trace (a few percent from 100,000 to 1,000,000 records; at
10,000,000 records of many processes 8-17 % more, with what is kept per process
and client, and parquet's 1.4x warm to 2.1x cold, with every RM object: docs/export.md has the
figures, the layouts and the dataset's columns).
"""

FORMATS = ("pcapng", "perfetto", "jsonl", "parquet")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", metavar="FILE", nargs="*",
                        help="traces to export (parquet takes several; default: the shipped capture of three "
                             "CUDA clients)")
    parser.add_argument("--format", "-f", choices=FORMATS, help="what to write")
    parser.add_argument("-o", "--output", metavar="OUT", help="the file to write (jsonl: - for standard output; "
                                                              "parquet: the dataset directory)")
    parser.add_argument("--force", action="store_true", help="replace an existing output file")
    parser.add_argument("--dissector", metavar="DIR", help="write the Wireshark dissector (rmtrace.lua) into DIR")
    parser.add_argument("--driver", metavar="VERSION", help="decode with this driver's profile, not the recorded one")
    parser.add_argument("--host", metavar="NAME", help="parquet: the host the traces came from (default: the one "
                                                       "each trace recorded)")


def _traces(args: argparse.Namespace) -> list[str]:
    from rmtrace.cli.common import STDIN, _trace_path, trace_input, trace_or_default
    if not args.traces:
        args.trace = None
        return [trace_or_default(args)]
    if args.traces.count(STDIN) > 1:
        raise RmtraceError("stdin holds one trace: give - once")
    return [trace_input(_trace_path(t)) for t in args.traces]


def run(args: argparse.Namespace) -> int:
    if args.format is None and args.dissector is None:
        raise RmtraceError("say what to write: --format pcapng|perfetto|jsonl|parquet, or --dissector DIR")
    if args.host is not None and args.format != "parquet":
        raise RmtraceError("--host names the host of a parquet dataset's rows: give it with --format parquet only")
    traces = _traces(args) if args.format or args.traces else []
    if args.dissector is not None:
        _write_dissector(args, traces)
    if args.format is None:
        return 0
    if args.output is None:
        raise RmtraceError(f"--format {args.format} needs -o OUT")
    if args.format != "parquet":
        if len(traces) != 1:
            raise RmtraceError(f"--format {args.format} exports one trace; only parquet takes several")
        from rmtrace.cli.common import output_path
        out = output_path(args.output, force=args.force, inputs=tuple(traces), stdout=args.format == "jsonl")
        _export_one(args, traces[0], out)
        return 0
    from rmtrace.export.parquet import export_dataset
    written = export_dataset(traces, args.output, driver=args.driver, host=args.host, force=args.force)
    for path, rows in written:
        print(f"{path}: {rows:,} calls", file=sys.stderr)
    return 0


def _export_one(args: argparse.Namespace, trace: str, out: str) -> None:
    from rmtrace.export import writer
    from rmtrace.export.source import ExportInput
    write = writer(args.format)
    with ExportInput(trace, driver=args.driver) as src:
        if src.warning:
            print(f"rmtrace export: {src.warning}", file=sys.stderr)
        count = write(src, out)
    print(f"rmtrace export: {'standard output' if out == '-' else out}: {count:,} "
          f"{'packets' if args.format == 'pcapng' else 'objects'}", file=sys.stderr)


def _write_dissector(args: argparse.Namespace, traces: list[str]) -> None:
    from rmtrace.decoders import DecoderSet, decoders_for
    from rmtrace.decoders.profiles import select_profile
    from rmtrace.export.dissector import TEMPLATE, write_dissector
    from rmtrace.trace import TraceReader
    if traces:
        with TraceReader(traces[0]) as reader:
            decoders = decoders_for(reader, override=args.driver, user=False)
    else:
        profile, warning = select_profile(None, override=args.driver)
        if args.driver is None:
            print(f"rmtrace export: no FILE or --driver; the dissector is for profile {profile.version}", file=sys.stderr)
        decoders = DecoderSet(profile, user=False)
    from rmtrace.cli.common import output_path
    output_path(os.path.join(args.dissector, TEMPLATE), force=args.force, inputs=tuple(traces))
    path = write_dissector(args.dissector, decoders)
    print(f"rmtrace export: {path} (profile {decoders.profile.version}); "
          f"tshark -X lua_script:{path} -r FILE.pcapng", file=sys.stderr)

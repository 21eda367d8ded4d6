"""rmtrace diff: the first divergence between two runs, and per-client traffic."""

from __future__ import annotations

import argparse
import sys

from rmtrace.cli.common import STDIN, _trace_path, add_json_argument, trace_input
from rmtrace.errors import RmtraceError
from rmtrace.exitcodes import ExitCode

NAME = "diff"
BIG_ARRAYS = True
"""Its column steps' row-long temporaries are mapped on their own (``rmtrace.columns.heap``)."""
HELP = "first divergence between two runs, per-client traffic counts"
DESCRIPTION = """\
Align two runs per client (c1 with c1, ...) by stable names (the path of classes
from the root client and allocation order, not RM's handle values) and report the
first divergence: a call one run lacks, a different status, a different output
field, a client that goes quiet.  Then a table of traffic per client and source,
run A beside run B.  Exit status 0 when the runs agree, 1 when they diverge.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", type=_trace_path,
                        help="the reference run (e.g. a green one): a trace, a shipped capture's name, or - for stdin")
    parser.add_argument("b", metavar="B", type=_trace_path, help="the run to compare (the same)")
    parser.add_argument("--driver", metavar="VERSION", help="decode both with this driver profile")
    add_json_argument(parser, "the first divergence (if any), then a traffic object per client and source")


def run(args: argparse.Namespace) -> int:
    from rmtrace import jsonschema
    from rmtrace.analysis.diff import describe_position, first_divergence, traffic_table
    from rmtrace.session import load_session
    if args.a == args.b == STDIN:
        raise RmtraceError("stdin holds one trace: give - for A or for B, not both")
    a = load_session(trace_input(args.a), driver=args.driver)
    b = load_session(trace_input(args.b), driver=args.driver)
    div = first_divergence(a, b)
    table = traffic_table(a, b)
    if args.json:
        found = [jsonschema.divergence(div, a.start_ns, b.start_ns)] if div else []
        jsonschema.write_lines(found + jsonschema.traffic(table), sys.stdout)
        return ExitCode.FOUND if div else ExitCode.OK
    if div is None:
        print("no divergence: every client made the same calls with the same results")
    else:
        print(f"first divergence: {div.summary}")
        print(f"    run A: {describe_position(a, div.a)}    run B: {describe_position(b, div.b)}")
        for line in div.details:
            print(f"    {line}")
    sources = sorted({s for row in table for s in row["sources"]})
    print()
    print("client  " + "  ".join(f"{s:>13}" for s in sources))
    print("        " + "  ".join(f"{'A':>6} {'B':>6}" for _ in sources))
    for row in table:
        cells = "  ".join(f"{row['sources'].get(s, [0, 0])[0]:>6} {row['sources'].get(s, [0, 0])[1]:>6}"
                          for s in sources)
        print(f"{row['client']:<8}{cells}")
    return ExitCode.FOUND if div else ExitCode.OK

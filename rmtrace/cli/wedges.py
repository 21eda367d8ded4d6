"""rmtrace wedges: where and why a session stalled."""

from __future__ import annotations

import argparse
import sys

from rmtrace.cli.common import add_json_argument, add_trace_argument, positive_duration, trace_or_default
from rmtrace.exitcodes import ExitCode

NAME = "wedges"
BIG_ARRAYS = True
"""Its column steps' row-long temporaries are mapped on their own (``rmtrace.columns.heap``)."""
HELP = "calls that never returned, and what they wait on (exit 3 when something is wedged)"
DESCRIPTION = """\
Rank what never finished: calls in flight at the end of the trace (or slower than
--slow), GSP requests without a response, channels with work but no completion,
ranks whose one-shot latch fired and never re-armed, clients that went quiet.
Each comes with its chain in plain words: which client, blocked in what, since
when, waiting on what (another client's call holding a lock, a missing
completion on a rank).  Exit status 0 when nothing is found, 3 when something
is wedged, 1 when the only findings are calls that returned late (--slow).
"""

FINDINGS = frozenset({"slow"})
"""Wedge kinds that finished, only late: found (exit 1), not wedged (exit 3)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_trace_argument(parser)
    parser.add_argument("--slow", default="1s", metavar="TIME", type=positive_duration,
                        help="report completed calls slower than this (default 1s)")
    parser.add_argument("--driver", metavar="VERSION", help="decode with this driver profile")
    add_json_argument(parser, "a wedge object per wedge, most important first")


def run(args: argparse.Namespace) -> int:
    from rmtrace import jsonschema
    from rmtrace.analysis.wedges import cut_by_end, find_wedges
    from rmtrace.session.model import load_channels
    model = load_channels(trace_or_default(args), driver=args.driver)  # what wedges reads: not the whole fold
    wedges = find_wedges(model, slow_ns=args.slow)
    if args.json:
        jsonschema.write_lines((jsonschema.wedge(w, model.start_ns) for w in wedges), sys.stdout)
        return _status(wedges)
    cut = cut_by_end(model)
    if model.cut:  # a recovered trace: what was in flight at its end may have returned after it
        print(f"trace recovered: {model.recovery.describe()}")
        for c in cut:
            print(f"  {c.summary}")
    if not wedges:
        ended = "every call returned or was cut by the end of the recording" if cut else "every call returned"
        print(f"no wedges: {ended}, {len(model.clients)} clients")
    else:
        for w in wedges:
            print(f"#{w.rank} [{w.kind}] {w.summary}")
            for line in w.chain:
                print(f"    {line}")
    return _status(wedges)


def _status(wedges: list) -> int:
    if any(w.kind not in FINDINGS for w in wedges):
        return ExitCode.WEDGED
    return ExitCode.FOUND if wedges else ExitCode.OK

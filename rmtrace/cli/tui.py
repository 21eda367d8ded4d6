"""rmtrace tui: the interactive view for hunting wedges (Textual)."""

from __future__ import annotations

import argparse

from rmtrace.cli.common import STDIN, _trace_path, trace_input, trace_or_default
from rmtrace.errors import RmtraceError

NAME = "tui"
COLUMNS = True  # reads the call table: numpy loaded with one BLAS thread (cli/main.py)
HELP = "interactive timeline, events, objects and wedges (two traces: a diff; --follow: live)"
DESCRIPTION = """\
Open a trace in a terminal UI: one lane per channel and per rank, grouped by
client, over time; the state of every lane at the cursor and the host
counters; the events table (filter with f, search with /, Enter for the
decoded fields and a hex view); the RM object tree per client; w jumps to the
next wedge with its chain.  Two traces show a diff: aligned lanes, the first
divergence marked.  --follow watches a trace that is still being recorded.
Press ? inside for every key.

  rmtrace tui run1.trace
  rmtrace tui run1.trace run2.trace
  rmtrace tui --follow live.trace
  rmtrace tui                         # the shipped H200 capture (three CUDA clients in a row)
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="*", metavar="FILE", type=_trace_path,
                        help="a trace or a shipped capture's name; two to compare them "
                             "(default: the shipped capture of three CUDA clients one after another on an H200)")
    parser.add_argument("--follow", action="store_true", help="follow a trace that is still being recorded")


def run(args: argparse.Namespace) -> int:
    if len(args.traces) > 2:
        raise RmtraceError("give one trace, or two to compare them")
    if args.traces.count(STDIN) > 1:
        raise RmtraceError("stdin holds one trace: give - once")
    traces = [trace_input(t) for t in args.traces] or [trace_or_default(argparse.Namespace(trace=None))]
    from rmtrace.tui.app import RmtraceApp
    from rmtrace.tui.services import library_services
    from rmtrace.tui.terminal import on_terminal

    app = RmtraceApp.open(traces, library_services(), follow=args.follow)
    with on_terminal():  # the terminal itself, also when stdin or stderr is redirected
        app.run()
    return app.return_code or 0

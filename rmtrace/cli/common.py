"""Arguments and helpers that several commands share."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from typing import Any

from rmtrace.errors import RmtraceError
from rmtrace.record import Phase, Source
from rmtrace.timefmt import parse_duration
from rmtrace.trace import RecordFilter, TraceReader


def add_trace_argument(parser: argparse.ArgumentParser) -> None:
    """FILE, optional: without one, the shipped H200 capture (three CUDA clients in a row)."""
    parser.add_argument("trace", metavar="FILE", nargs="?", type=_trace_path,
                        help="a trace written by 'rmtrace record' (or a replay), - for stdin, or the name of a shipped capture "
                             "(default: the shipped capture of three CUDA clients one after another on an H200)")
    parser.set_defaults(trace=None)


STDIN = "-"
"""FILE given as '-': the trace comes on standard input."""


def _trace_path(text: str) -> str:
    """A path as given; a bare name that is no file but a shipped capture's name means that capture."""
    from pathlib import Path

    from rmtrace import captures
    if text == STDIN or Path(text).exists() or "/" in text or text.removesuffix(".trace") not in captures.shipped():
        return text
    return str(captures.path(text))


def stdin_trace() -> str:
    """A path for the trace on stdin: stdin itself when it is a file, else the pipe's bytes in a temporary
    file (a reader seeks; a pipe cannot), removed when rmtrace exits."""
    import atexit
    import shutil
    import stat
    import tempfile

    fd = sys.stdin.fileno()
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        return f"/dev/fd/{fd}"
    if os.isatty(fd):
        raise RmtraceError("FILE '-' reads the trace from stdin, which is a terminal: pipe or redirect a trace to it")
    with tempfile.NamedTemporaryFile(prefix="rmtrace-stdin-", suffix=".trace", delete=False) as spool:
        atexit.register(os.unlink, spool.name)
        shutil.copyfileobj(sys.stdin.buffer, spool, 1 << 20)
    return spool.name


def trace_or_default(args: argparse.Namespace) -> str:
    """The FILE argument ('-' for stdin), or the shipped default capture (saying so on stderr)."""
    if args.trace == STDIN:
        return stdin_trace()
    if args.trace is not None:
        return args.trace
    from rmtrace import captures
    chosen = captures.path()
    print(f"rmtrace: no FILE given; using the shipped capture {chosen.name} "
          f"(list them with 'rmtrace info --shipped')", file=sys.stderr)
    return str(chosen)


def _names_to_values(text: str, enum_type: Any, what: str) -> frozenset[int]:
    values = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if part.isdigit():
            values.add(int(part))
            continue
        try:
            values.add(int(enum_type[part.upper()]))
        except KeyError:
            names = ", ".join(m.name.lower() for m in enum_type)
            raise RmtraceError(f"unknown {what} {part!r} (one of: {names})") from None
    return frozenset(values)


def _int_list(text: str) -> frozenset[int]:
    try:
        return frozenset(int(p, 0) for p in text.split(",") if p.strip())
    except ValueError:
        raise RmtraceError(f"not a list of numbers: {text!r}") from None


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("filters")
    group.add_argument("--pid", metavar="PIDS", help="only these process ids (comma separated)")
    group.add_argument("--source", metavar="SOURCES", help="only these sources: rm, uvm, gsp, sema, sys, mark")
    group.add_argument("--phase", metavar="PHASES", help="only these phases: enter, exit, send, recv, event")
    group.add_argument("--op", metavar="OPS", help="only these operation numbers (0x2a,37,...)")
    group.add_argument("--from", dest="t_from", metavar="TIME", help="from this time after the trace start (e.g. 1.5s)")
    group.add_argument("--to", dest="t_to", metavar="TIME", help="up to this time after the trace start")
    group.add_argument("--limit", type=int, metavar="N", help="stop after N lines")


def trace_start(reader: TraceReader) -> int:
    span = reader.time_span
    return span[0] if span else 0


def filter_from_args(args: argparse.Namespace, reader: TraceReader) -> RecordFilter:
    start = trace_start(reader)
    return RecordFilter(
        source=_names_to_values(args.source, Source, "source") if args.source else None,
        phase=_names_to_values(args.phase, Phase, "phase") if args.phase else None,
        pid=_int_list(args.pid) if args.pid else None,
        op=_int_list(args.op) if args.op else None,
        t0=start + parse_duration(args.t_from) if args.t_from else None,
        t1=start + parse_duration(args.t_to) if args.t_to else None,
    )


def print_json_lines(objects: Iterable[dict[str, Any]], limit: int | None = None) -> None:
    out = sys.stdout
    for n, obj in enumerate(objects):
        if limit is not None and n >= limit:
            break
        out.write(json.dumps(obj, separators=(",", ":")) + "\n")

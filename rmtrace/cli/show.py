"""rmtrace show: the calls of a trace, strace-like, decoded for the trace's driver."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Collection, Iterable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from rmtrace.cli.common import (
    add_filter_arguments,
    add_json_argument,
    add_trace_argument,
    close_matches,
    filter_from_args,
    trace_or_default,
    trace_start,
)
from rmtrace.errors import RmtraceError
from rmtrace.exitcodes import ExitCode

if TYPE_CHECKING:
    from rmtrace.calls import Call
    from rmtrace.columns.lines import Lines
    from rmtrace.decoders import DecoderSet, Level
    from rmtrace.decoders.base import Decoded
    from rmtrace.decoders.filters import CallFilter
    from rmtrace.record import Record
    from rmtrace.trace import RecordFilter, TraceReader

NAME = "show"
COLUMNS = True  # reads the call table: numpy loaded with one BLAS thread (cli/main.py)
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
    from rmtrace.record import Phase, Role, Source, When, enum_name
    from rmtrace.timefmt import format_offset
    bufs = ", ".join(
        f"{enum_name(Role, b.role).lower()}/{enum_name(When, b.when).lower()} {len(b.data)}B" for b in rec.buffers)
    result = f" = {rec.ret}" + (f" (errno {rec.err})" if rec.err else "") if rec.phase == Phase.EXIT else ""
    return (f"{rec.seq:>8} {format_offset(rec.time_ns - start):>14} [{rec.pid}/{rec.tid}] "
            f"{enum_name(Source, rec.source)} {enum_name(Phase, rec.phase).lower()} op={rec.op:#x} "
            f"fd={rec.fd} call={rec.call_id}{result}" + (f" [{bufs}]" if bufs else ""))


def _split(text: str | None) -> tuple[str, ...]:
    return tuple(p.strip() for p in (text or "").split(",") if p.strip())


def call_filter(args: argparse.Namespace, decoders: DecoderSet) -> CallFilter:
    """--name, --status, --failed and --handle, each name or glob checked against what the profile can say."""
    from rmtrace.decoders.filters import CallFilter, status_number
    try:
        handles = frozenset(int(h, 0) for h in _split(args.handle))
    except ValueError:
        raise RmtraceError(f"--handle: not a list of numbers: {args.handle!r}") from None
    names, statuses = _split(args.name), _split(args.status)
    # the names a profile knows only when there is a pattern to check (every name of every table: a tenth
    # of a second)
    if names:
        _check_globs("--name", names, operation_names(decoders),
                     "an operation (RM_CONTROL, UVM_REGISTER_GPU), a control, class or GSP function of profile "
                     f"{decoders.profile.version}, or a glob of them (NV2080_CTRL_CMD_GPU_*)")
    numbers_not = [s for s in statuses if status_number(s) is None]
    if numbers_not:
        _check_globs("--status", numbers_not, status_names(decoders),
                     f"a number (0x56), an NV_STATUS of profile {decoders.profile.version} (NV_ERR_NOT_SUPPORTED), "
                     "an errno name (EINVAL), or a glob of them (NV_ERR_*)")
    return CallFilter(names, statuses, args.failed, handles)


def operation_names(decoders: DecoderSet) -> set[str]:
    """Every name a call's label can carry under this profile: operations and what they name, and for
    each source the form an operation no table knows takes (RM_OP_0x7f: RM_OP_* matches it)."""
    from rmtrace.record import Source
    p = decoders.profile
    return ({op.name for table in decoders.tables.values() for op in table.values()}
            | {decoders.op(source, 0xFFFFFFFF).name for source in Source}
            | {c.name for c in p.controls.values()} | {c.name for c in p.classes.values()}
            | {u.name for u in p.uvm.values()} | set(p.gsp_functions.values()) | set(p.gsp_events.values()))


def status_names(decoders: DecoderSet) -> set[str]:
    import errno
    return set(decoders.profile.status.values()) | set(errno.errorcode.values())


def _check_globs(option: str, patterns: Iterable[str], known: set[str], what: str) -> None:
    """Each pattern must match a known name: a typo would otherwise filter out everything, silently.
    Names the decoders make from numbers (NV2080_CTRL_CMD_THERMAL_0x46: no header names it) count as known."""
    from fnmatch import fnmatchcase
    for pattern in patterns:
        if "0x" in pattern or any(fnmatchcase(name, pattern) for name in known):
            continue
        raise RmtraceError(f"{option}: nothing is called {pattern!r}{close_matches(pattern, known)}; give {what}")


DECODING_OPTIONS = {"name": "--name", "status": "--status", "failed": "--failed", "handle": "--handle",
                    "verbose": "-V", "driver": "--driver"}
"""Options that work on decoded calls: --raw, which prints records undecoded, has no use for them."""


def _show_raw(args: argparse.Namespace, reader: TraceReader) -> None:
    given = [flag for dest, flag in DECODING_OPTIONS.items() if getattr(args, dest)]
    if given:
        raise RmtraceError(f"--raw prints records undecoded: {', '.join(given)} need decoded calls (drop --raw)")
    start = trace_start(reader)
    records = reader.iter_filtered(filter_from_args(args, reader))
    if args.json:
        from rmtrace import jsonschema
        jsonschema.write_lines((jsonschema.record(r, start) for r in records), sys.stdout, args.limit)
        return
    for n, rec in enumerate(records):
        if args.limit is not None and n >= args.limit:
            break
        print(raw_line(rec, start))


TABLE_FROM_RECORDS = 20_000
"""From this many records on, the call table chooses show's calls.  A smaller trace is paired and decoded
whole: building its table would cost more (numpy and the table's modules are ~0.4 s of CPU to import)
than decoding every call of it."""


def _calls(reader: TraceReader, decoders: DecoderSet, records: RecordFilter, wanted: CallFilter,
           lines: bool, span: tuple[int, int | None]) -> Iterable[Call | Lines]:
    """The calls that may pass ``wanted``, in the order they start, each still to be checked against it.
    With ``lines``, those whose lines are made without their records come as those ``Lines``, checked
    (rmtrace.columns.lines; ``span``: the trace's start and end, which a line's times are from)."""
    import dataclasses
    records = dataclasses.replace(records, phase=None)  # --phase chooses calls by any of their records: see _show_calls
    if reader.record_count < TABLE_FROM_RECORDS:
        return decoders.calls(reader.iter_filtered(dataclasses.replace(records, t1=None)))
    # the call table (built, or loaded from the cache) chooses the calls on its columns: only those
    # printed are read and decoded (rmtrace.columns.select), and most not even that (rmtrace.columns.lines)
    from rmtrace.columns.cache import call_table
    from rmtrace.columns.lines import ColumnLines
    from rmtrace.columns.select import selected_calls
    table = call_table(reader, decoders)
    made = ColumnLines(decoders, table, reader, wanted, *span) if lines else None
    return selected_calls(reader, decoders, table, records, wanted, made)


def _show_calls(args: argparse.Namespace, reader: TraceReader) -> None:
    from rmtrace.decoders import Level, decoders_for, render
    if args.json:
        from rmtrace import jsonschema
    decoders = decoders_for(reader, override=args.driver)
    if decoders.warning:
        print(f"rmtrace show: {decoders.warning}", file=sys.stderr)
    wanted = call_filter(args, decoders)
    level = max(wanted.level, Level.FULL if args.verbose or args.json else Level.CALL)
    span = reader.time_span
    start, end = span if span else (0, None)
    status_name = decoders.profile.status.get
    # --phase and --to choose calls, not records: a call is folded from all its records, so that one whose
    # exit is filtered out, or comes after --to, still shows how it returned (it did not stay in flight).
    records = filter_from_args(args, reader)
    phases, until = records.phase, records.t1
    # a line from the columns holds the call level's decode: not the buffers -V, --json and --handle need,
    # nor the records --phase looks at
    lines = level == Level.CALL and phases is None
    out = sys.stdout
    calls = _shown(_calls(reader, decoders, records, wanted, lines, (start, end)), decoders, wanted, level, until,
                   phases)
    if args.json:  # every call decoded in full: no Lines come (``lines`` is False)
        jsonschema.write_lines((jsonschema.call(item.decoded, item.call, start) for item in calls if isinstance(item, Shown)),
                               out, args.limit)
        return
    shown = 0
    for item in calls:
        if args.limit is not None and shown >= args.limit:
            break
        if not isinstance(item, Shown):  # Lines (their module, and numpy, imported only with the table): their
            texts = item.texts          # calls start by --to and pass the call filter (the row mask, and they)
            if args.limit is not None:
                texts = texts[:args.limit - shown]
            shown += len(texts)
            out.write("\n".join(texts) + "\n")
            continue
        shown += 1
        out.write(render.line(item.decoded, item.call, start, end) + "\n")
        if args.verbose:
            for text in render.tree(item.decoded, status_name):
                out.write(text + "\n")

class Shown(NamedTuple):
    """A call ``show`` prints, with its decode."""

    call: Call
    decoded: Decoded


def _shown(calls: Iterable[Call | Lines], decoders: DecoderSet, wanted: CallFilter, level: Level, until: int | None,
           phases: Collection[int] | None) -> Iterator[Shown | Lines]:
    """Of ``calls``, those shown, each call with its decode at ``level``; ``Lines`` as they come (checked
    already).  Calls come in the order they start (a recording is written in time order), so the first after
    ``until`` ends them."""
    from rmtrace.calls import Call
    for call in calls:
        if not isinstance(call, Call):
            yield call
            continue
        if until is not None and call.first.time_ns > until:
            return
        if phases is not None and not any(r.phase in phases for r in call.records):
            continue
        if not wanted.wants_label(decoders.label(call.first)):
            continue
        decoded = decoders.decode(call, level)
        if wanted.wants(decoded):
            yield Shown(call, decoded)


def run(args: argparse.Namespace) -> int:
    from rmtrace.trace import TraceReader
    with TraceReader(trace_or_default(args)) as reader:
        if args.raw:
            _show_raw(args, reader)
        else:
            _show_calls(args, reader)
        if not reader.recovery.complete:
            print(f"# {reader.recovery.describe()}", file=sys.stderr if args.json else sys.stdout)
    return ExitCode.OK

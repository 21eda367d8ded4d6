"""rmtrace stats: numbers about a trace, one section per question.

Each section is a ``Section``: the flag that asks for it, a function that
computes a JSON-ready dict from the trace, and one that turns that dict into
lines of text.  Adding a section is adding one entry to ``SECTIONS``.  With
no section flag the default sections are printed; ``--json`` prints each
section's objects (docs/json-schema.md), one per line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any, NamedTuple

from rmtrace.cli.common import add_json_argument, add_trace_argument, trace_or_default
from rmtrace.exitcodes import ExitCode
from rmtrace.timefmt import format_duration

if TYPE_CHECKING:
    from rmtrace.columns.stats import Operations

NAME = "stats"
BIG_ARRAYS = True
"""Its column steps' row-long temporaries are mapped on their own (``rmtrace.columns.heap``)."""
HELP = "calls per process/client/operation (counts, statuses, latency, bytes); decode coverage (--decode)"
DESCRIPTION = """\
Print numbers about a trace.

--calls (the default): fold the trace and print, per process, client, source
and operation, how many calls there were, their statuses, latency (min,
median, p99, max) and the bytes of their buffers.

--decode: how much of the trace the decoders name and unfold for its driver
profile: records named, allocated classes named, control commands named by
full name / by class and category, controls decoded field by field, and
decoder exceptions (always 0, or it is a bug to report).
"""


class Section(NamedTuple):  # not a dataclass: dataclasses imports inspect, a cost to every command's start
    name: str
    help: str
    compute: Callable[[str, argparse.Namespace], dict[str, Any]]  # (trace path, arguments) -> JSON-ready dict
    text: Callable[[dict[str, Any]], Iterable[str]]
    lines: Callable[[dict[str, Any]], Iterable[bytes]]  # the dict as docs/json-schema.md's objects, encoded lines
    default: bool = False


def _calls(path: str, args: argparse.Namespace) -> dict[str, Any]:
    from rmtrace.analysis.stats import stats_parts
    from rmtrace.session.model import load_objects
    # the table and the objects, not the whole fold; the operation rows are made as they are printed
    return stats_parts(load_objects(path, driver=args.driver))


def _calls_text(stats: dict[str, Any]) -> Iterator[str]:
    for client in stats["clients"]:
        counts = ", ".join(f"{s} {n}" for s, n in sorted(client["sources"].items()))
        o = client["objects"]
        yield (f"{client['label']}: {counts}; objects {o['allocated']} allocated, {o['freed']} freed, "
               f"{o['freed_at_exit']} freed at exit, {o['leaked']} leaked")
    yield ""
    yield (f"{'pid':>7} {'client':<6} {'source':<5} {'operation':<58} {'count':>6}  "
           f"{'latency min/med/p99/max':<34} {'bytes':>9}  statuses")
    yield from _operation_lines(stats["operations"])


def _operation_lines(ops: Operations) -> Iterator[str]:
    """One line per row of ``ops``, made from its columns a block at a time (no row's dict): each client,
    source, operation name and latency value is formatted once (1M records: 74,000 rows, whose 286,000
    latency figures hold ~700 distinct values), and a row's statuses sorted only when it has several."""
    from rmtrace.columns.arrays import distinct
    clients = [f"{c or '-':<6}" for c in ops.clients]
    sources = {k: f"{v:<5}" for k, v in ops.sources.items()}
    names = [f"{n[:58]:<58}" for n in ops.names]
    d = {v: format_duration(v) for v in distinct(ops.latency[ops.timed]).tolist()}
    for b in ops.blocks():
        text, counted, bounds = b.status_text, b.status_count, b.status_bounds
        statuses = [f"{text[a]} {counted[a]}" if z - a == 1 else
                    ", ".join(f"{k} {v}" for k, v in sorted(dict(zip(text[a:z], counted[a:z])).items(),
                                                            key=lambda kv: -kv[1]))
                    for a, z in zip(bounds, bounds[1:])]
        latency = [f"{d[lo]}/{d[med]}/{d[p99]}/{d[hi]}" if t else "-"
                   for lo, med, p99, hi, t in zip(b.latency_min, b.latency_median, b.latency_p99, b.latency_max, b.timed)]
        yield from [f"{p:>7} {clients[cl]} {sources[so]} {names[o]} {n:>6}  {lat:<34} {by:>9}  {st}"
                    for p, cl, so, o, n, lat, by, st in zip(b.pid, b.client, b.source, b.operation, b.calls,
                                                            latency, b.bytes, statuses)]


def _decode(path: str, args: argparse.Namespace) -> dict[str, Any]:
    from rmtrace.decoders import decoders_for
    from rmtrace.decoders.coverage import decode_coverage
    from rmtrace.trace import TraceReader
    with TraceReader(path) as reader:
        decoders = decoders_for(reader, override=args.driver)
        out = decode_coverage(reader, decoders).to_dict()
    out["profile"] = decoders.profile.version
    out["profile_warning"] = decoders.warning
    return out


def _stats_lines(stats: dict[str, Any]) -> Iterator[bytes]:
    from rmtrace import jsonschema
    return jsonschema.stats_lines(stats)


def _coverage_lines(c: dict[str, Any]) -> Iterator[bytes]:
    from rmtrace import jsonschema
    return jsonschema.encoded([jsonschema.coverage(c)])


def _decode_text(c: dict[str, Any]) -> list[str]:
    by = c["controls_by_naming"]
    lines = [
        f"profile                {c['profile']}" + (f"  ({c['profile_warning']})" if c["profile_warning"] else ""),
        f"records named          {c['records_named_pct']:6.2f}%  ({c['records_named']:,} of {c['records']:,})",
        f"classes named          {c['classes_named_pct']:6.2f}%  ({c['allocs_named']:,} of {c['allocs']:,} allocations)",
        f"controls named         {c['controls_at_least_class_and_category_pct']:6.2f}%  at least by class and category "
        f"({c['controls']:,} control calls)",
        f"  by full name         {c['controls_full_name_pct']:6.2f}%  ({by['full']:,})",
        f"  by class+category    {c['controls_class_category_name_pct']:6.2f}%  ({by['category']:,}, category by name)",
        f"                       {c['controls_class_category_number_pct']:6.2f}%  ({by['class']:,}, category by number: "
        f"the headers name none)",
        f"  field by field       {c['controls_field_by_field_pct']:6.2f}%  ({c['controls_field_by_field']:,}; "
        f"{c['params_decoded_where_profile_has_layout_pct']:.2f}% of those the profile has a layout for)",
        f"decoder exceptions     {c['exceptions']}",
    ]
    for title, key in (("not named", "unnamed_ops"), ("classes not named", "unnamed_classes"),
                       ("controls without a full name", "partly_named_controls"),
                       ("params that did not fit the profile's layout", "params_not_decoded")):
        if c[key]:
            lines.append(f"{title}: " + ", ".join(f"{k} ×{n}" for k, n in list(c[key].items())[:12]))
    lines.extend(f"  exception: {e}" for e in c["exception_examples"])
    return lines


SECTIONS = (
    Section("calls", "per process, client, source and operation: counts, statuses, latency, bytes (default)",
            _calls, _calls_text, _stats_lines, default=True),
    Section("decode", "decode coverage for the trace's driver profile", _decode, _decode_text, _coverage_lines),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_trace_argument(parser)
    for section in SECTIONS:
        parser.add_argument(f"--{section.name}", action="store_true", help=section.help)
    parser.add_argument("--driver", metavar="VERSION", help="decode with this driver's profile, not the recorded one")
    add_json_argument(parser, "process, client and stats objects (--calls), a coverage object (--decode)")


def run(args: argparse.Namespace) -> int:
    chosen = [s for s in SECTIONS if getattr(args, s.name)] or [s for s in SECTIONS if s.default]
    path = trace_or_default(args)
    results = {s.name: s.compute(path, args) for s in chosen}
    if args.json:
        from rmtrace import jsonschema
        jsonschema.write_encoded((line for s in chosen for line in s.lines(results[s.name])), sys.stdout)
        return ExitCode.OK
    lines = _text(chosen, results)
    while batch := list(islice(lines, LINES_AT_ONCE)):
        sys.stdout.write("\n".join(batch) + "\n")
    return ExitCode.OK


def _text(chosen: list[Section], results: dict[str, dict[str, Any]]) -> Iterator[str]:
    """The chosen sections' lines, each under its name when there are several."""
    for section in chosen:
        if len(chosen) > 1:
            yield f"[{section.name}]"
        yield from section.text(results[section.name])


LINES_AT_ONCE = 1024
"""Lines of text joined into one write (1M records' 74,800 lines: a print each took 0.09 s CPU, batched 0.035 s)."""

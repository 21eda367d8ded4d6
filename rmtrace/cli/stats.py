"""rmtrace stats: numbers about a trace, one section per question.

Each section is a ``Section``: the flag that asks for it, a function that
computes a JSON-ready dict from the open trace, and one that turns that dict
into lines of text.  Adding a section (per-process latency, say) is adding one
entry to ``SECTIONS``; ``rmtrace stats FILE`` with no section flag prints them all.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any, Callable

from rmtrace.cli.common import add_trace_argument
from rmtrace.trace import TraceReader

NAME = "stats"
HELP = "numbers about a trace: decode coverage (--decode)"
DESCRIPTION = """\
Print numbers about a trace.  --decode: how much of it the decoders name and
unfold for its driver profile: records named, allocated classes named, control
commands named by full name / by class and category, controls decoded field by
field, and decoder exceptions (always 0, or it is a bug to report).  With no
section flag every section is printed.
"""


@dataclass(frozen=True)
class Section:
    name: str
    help: str
    compute: Callable[[TraceReader, argparse.Namespace], dict[str, Any]]
    text: Callable[[dict[str, Any]], list[str]]


def _decode(reader: TraceReader, args: argparse.Namespace) -> dict[str, Any]:
    from rmtrace.decoders import decoders_for
    from rmtrace.decoders.coverage import decode_coverage
    decoders = decoders_for(reader, override=args.driver)
    out = decode_coverage(reader, decoders).to_dict()
    out["profile"] = decoders.profile.version
    out["profile_warning"] = decoders.warning
    return out


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
        f"  field by field       {c['controls_field_by_field_pct']:6.2f}%  ({c['controls_field_by_field']:,})",
        f"decoder exceptions     {c['exceptions']}",
    ]
    for title, key in (("not named", "unnamed_ops"), ("classes not named", "unnamed_classes"),
                       ("controls without a full name", "partly_named_controls")):
        if c[key]:
            lines.append(f"{title}: " + ", ".join(f"{k} ×{n}" for k, n in list(c[key].items())[:12]))
    lines.extend(f"  exception: {e}" for e in c["exception_examples"])
    return lines


SECTIONS = (Section("decode", "decode coverage for the trace's driver profile", _decode, _decode_text),)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_trace_argument(parser)
    for section in SECTIONS:
        parser.add_argument(f"--{section.name}", action="store_true", help=section.help)
    parser.add_argument("--driver", metavar="VERSION", help="decode with this driver's profile, not the recorded one")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    chosen = [s for s in SECTIONS if getattr(args, s.name)] or list(SECTIONS)
    with TraceReader(args.trace) as reader:
        results = {s.name: s.compute(reader, args) for s in chosen}
    if args.json:
        print(json.dumps(results, indent=2, default=str))
        return 0
    for section in chosen:
        if len(chosen) > 1:
            print(f"[{section.name}]")
        for line in section.text(results[section.name]):
            print(line)
    return 0

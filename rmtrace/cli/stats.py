"""rmtrace stats: counts, statuses, latencies and bytes per process, client, source, operation."""

from __future__ import annotations

import argparse
import json

from rmtrace.analysis.stats import session_stats
from rmtrace.cli.common import add_trace_argument
from rmtrace.session import load_session
from rmtrace.timefmt import format_duration

NAME = "stats"
HELP = "per process/client/source/operation: counts, statuses, latency min/median/p99/max, bytes"
DESCRIPTION = """\
Fold the trace and print, per process, client, source and operation, how many
calls there were, their statuses, latency (min, median, p99, max) and the bytes
of their buffers.  --json prints the same as one JSON object.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_trace_argument(parser)
    parser.add_argument("--driver", metavar="VERSION", help="decode with this driver profile")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _latency(lat: dict | None) -> str:
    if lat is None:
        return "-"
    return "/".join(format_duration(lat[k]) for k in ("min", "median", "p99", "max"))


def run(args: argparse.Namespace) -> int:
    model = load_session(args.trace, driver=args.driver)
    stats = session_stats(model)
    if args.json:
        print(json.dumps(stats, indent=2))
        return 0
    for client in stats["clients"]:
        counts = ", ".join(f"{s} {n}" for s, n in sorted(client["sources"].items()))
        o = client["objects"]
        print(f"{client['label']}: {counts}; objects {o['allocated']} allocated, {o['freed']} freed, "
              f"{o['freed_at_exit']} freed at exit, {o['leaked']} leaked")
    print()
    header = f"{'pid':>7} {'client':<6} {'source':<5} {'operation':<58} {'count':>6}  {'latency min/med/p99/max':<34} {'bytes':>9}  statuses"
    print(header)
    for row in stats["operations"]:
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(row["statuses"].items(), key=lambda kv: -kv[1]))
        print(f"{row['pid']:>7} {row['client'] or '-':<6} {row['source']:<5} {row['operation'][:58]:<58} "
              f"{row['count']:>6}  {_latency(row['latency_ns']):<34} {row['bytes']:>9}  {statuses}")
    return 0

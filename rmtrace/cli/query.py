"""rmtrace query: SQL (DuckDB) over a dataset written by 'rmtrace export --format parquet'."""

from __future__ import annotations

import argparse
import csv
import sys
from typing import Any

from rmtrace.cli.common import add_json_argument

NAME = "query"
HELP = "run SQL (DuckDB) over a Parquet dataset of exported calls (table: calls)"
DESCRIPTION = """\
Run one SQL statement over a dataset that 'rmtrace export --format parquet'
wrote (many traces, many hosts).  The table is 'calls', one row per call,
partitioned by host and day; docs/export.md lists its columns.  p99(x) and
percentile(x, q) compute percentiles as 'rmtrace stats' does.

  rmtrace query "SELECT host, trace, client, duration_ns FROM calls
                 WHERE op = 'UVM_REGISTER_GPU' AND duration_ns > 1e9" fleet/
  rmtrace query "SELECT detail AS class, count(*), p99(latency_ns) FROM calls
                 WHERE op = 'RM_ALLOC' GROUP BY class ORDER BY 3 DESC" fleet/
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sql", metavar="SQL", help="one SQL statement over the table 'calls'")
    parser.add_argument("dataset", metavar="DIR", help="the dataset directory")
    out = parser.add_mutually_exclusive_group()
    add_json_argument(parser, "a row object per row, its columns under values", out)
    out.add_argument("--csv", action="store_true", help="CSV with a header line")


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def run(args: argparse.Namespace) -> int:
    from rmtrace.export.query import query
    columns, rows = query(args.sql, args.dataset)
    out = sys.stdout
    if args.json:
        from rmtrace import jsonschema
        jsonschema.write_lines((jsonschema.row(columns, r) for r in rows), out)
    elif args.csv:
        writer = csv.writer(out)
        writer.writerow(columns)
        writer.writerows(rows)
    else:
        cells = [[_text(v) for v in row] for row in rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
        out.write("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip() + "\n")
        for r in cells:
            out.write("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() + "\n")
        print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})", file=sys.stderr)
    return 0

"""`rmtrace show` on a large trace, with and without selective filters, beside `zstd -dc`.

    python bench/show.py [--records 1000000] [--trace FILE] [--rounds 3] [--steps ...]

The trace is FILE, or the shipped capture of three CUDA clients in a row
replicated to --records (bench/session.py's replicate).  Each step is a whole
``rmtrace show`` process (interpreter start included) writing to /dev/null,
timed as bench/columns.py times its commands and beside the same baselines
(``zstd -dc`` of the trace's chunk payloads, a plain zstd pass in Python), in
alternating rounds, with the cache off (the call table built in the process)
and warm (the call table loaded from the cache):

* ``show``: every call (no filter), its lines streamed out;
* ``show --failed`` (none fail in the replicated capture: nothing printed);
* ``show --name UVM_*``: the UVM calls, a few per client;
* ``show --pid P``: one process of the copies, about 1/200 of the calls;
* ``show --from --to``: a hundredth of the trace's time.

Show chooses its calls on the call table's columns and decodes only the ones
it prints (rmtrace/columns/select.py), so a selective filter costs the table
(built or loaded) and the calls printed.  Goal (issue 13): within 10x of
``zstd -dc``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import columns
from report import print_rows

FILTERS = ("", "--failed", "--name UVM_*", "--pid", "--from --to")
STEPS = ("zstd -dc", columns.BASELINE,
         *(f"show{' ' if f else ''}{f}{cache}" for f in FILTERS for cache in ("", ", cache warm")))


def filter_arguments(path: str) -> dict[str, list[str]]:
    """The show command line of each step (without the trace), its pid and times read from the trace."""
    from rmtrace.trace import TraceReader
    with TraceReader(path) as reader:
        t0, t1 = reader.time_span
        pid = reader.record_at(reader.record_count // 2).pid
    hundredth = (t1 - t0) // 100
    return {"": [], "--failed": ["--failed"], "--name UVM_*": ["--name", "UVM_*"], "--pid": ["--pid", str(pid)],
            "--from --to": ["--from", f"{50 * hundredth}ns", "--to", f"{51 * hundredth}ns"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--trace", help="time this trace as it is")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS), metavar="STEP",
                        help=f"which steps (default all: {', '.join(STEPS)}); the zstd baselines always run")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        path = columns.bench_trace(args.trace, args.records, tmp)
        for flt, argv in filter_arguments(path).items():  # columns' runner times a command by its name
            columns.COMMANDS[f"show{' ' if flt else ''}{flt}"] = ["show", *argv]
        steps = [s for s in STEPS if s in args.steps or s in ("zstd -dc", columns.BASELINE)]
        times = columns.measure(path, steps, args.rounds, tmp)
        from rmtrace.trace import TraceReader
        with TraceReader(path) as reader:
            n, size = reader.record_count, os.path.getsize(path)
    load_after = os.getloadavg()
    dc, dc_cpu, _ = columns.medians(times["zstd -dc"])
    rows = [*columns.header_rows(n, size, args.trace is not None, args.rounds, load_before, load_after),
            ("columns", "wall s | CPU s | x zstd -dc (wall; CPU) | peak RSS")]
    for step in steps:
        sec, cpu, peak = columns.medians(times[step])
        rows.append((step, f"{sec:7.2f} s | {cpu:7.2f} s | {sec / dc:6.1f}x; {cpu / dc_cpu:6.1f}x | "
                           f"{peak / 2**20:6.0f} MiB"))
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

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

Before the rounds, the bytecode of rmtrace's modules is written (as an installed
rmtrace has it; ``--no-compile``: not, so that where PYTHONDONTWRITEBYTECODE is set
each process compiles them, as this bench timed before).

Show chooses its calls on the call table's columns and decodes only the ones
it prints (rmtrace/columns/select.py), so a selective filter costs the table
(built or loaded) and the calls printed; the lines of most calls are made
without their records (rmtrace/columns/lines.py).  Goal (issue 13): within 10x
of ``zstd -dc``.  The CPU's speed moves within seconds, so each step's ratio is
also taken per round against a ``zstd -dc`` run right before it (bench/columns.py's
``measure``; ``report.paired_ratio``: median and range); a goal is met only when
the whole range clears it.

    python bench/show.py --shipped NAME [--rounds 15]

times instead, in this process, the lines of every call of a shipped capture
as it was recorded (no replicated copies: the memo of decoded summaries hits
only on calls the program itself repeated) made without their records
(``ColumnLines``) and by the decoders (every row decoded), in alternating
rounds, with the memo's hit rate: what the lines path costs where bytes repeat
less than in a replicated trace.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import columns
from report import paired_ratio, print_rows

FILTERS = ("", "--failed", "--name UVM_*", "--pid", "--from --to")
STEPS = ("zstd -dc", columns.BASELINE,
         *(f"show{' ' if f else ''}{f}{cache}" for f in FILTERS for cache in ("", ", cache warm")))


def compile_bytecode() -> str:
    """Write the bytecode of rmtrace's own modules before the rounds, as an installed rmtrace has it: where
    PYTHONDONTWRITEBYTECODE is set (the project's machines set it) each ``rmtrace show`` process would
    otherwise compile them again (~120 modules, ~0.3 s of CPU), which is no part of what show costs.
    Returns what the table says of it."""
    import compileall
    import importlib.util
    for name in ("rmtrace", "rmtrace.decoders", "rmtrace.replayer", "rmtrace.tui"):
        spec = importlib.util.find_spec(name)
        for where in (spec.submodule_search_locations or []) if spec is not None else []:
            compileall.compile_dir(where, quiet=1)
    return "rmtrace's modules compiled before the rounds (each process reads their bytecode)"


def filter_arguments(path: str) -> dict[str, list[str]]:
    """The show command line of each step (without the trace), its pid and times read from the trace."""
    from rmtrace.trace import TraceReader
    with TraceReader(path) as reader:
        t0, t1 = reader.time_span
        pid = reader.record_at(reader.record_count // 2).pid
    hundredth = (t1 - t0) // 100
    return {"": [], "--failed": ["--failed"], "--name UVM_*": ["--name", "UVM_*"], "--pid": ["--pid", str(pid)],
            "--from --to": ["--from", f"{50 * hundredth}ns", "--to", f"{51 * hundredth}ns"]}


def shipped(name: str, rounds: int) -> int:
    """``--shipped``: the lines of a shipped capture made both ways, CPU time per round, alternating."""
    import statistics
    import time

    import numpy as np
    from rmtrace.decoders import Level, decoders_for, render
    from rmtrace.decoders.filters import CallFilter

    from rmtrace import captures
    from rmtrace.calls import Call
    from rmtrace.columns import lines as lines_module
    from rmtrace.columns.select import selected_calls
    from rmtrace.columns.table import CallTableBuilder
    from rmtrace.trace import RecordFilter, TraceReader

    load_before = os.getloadavg()
    with TraceReader(captures.path(name)) as reader:
        decoders = decoders_for(reader)
        builder = CallTableBuilder(reader, decoders)
        builder.update()
        table = builder.table()
        start, end = reader.time_span
        everything = RecordFilter(), CallFilter()

        def run(made: bool) -> tuple[float, int, lines_module.SummaryMemo]:
            lines = lines_module.ColumnLines(decoders, table, reader, everything[1], start, end)
            if not made:  # every row decoded, as show did before the lines path
                lines.kinds = lambda rows: np.zeros(len(rows), dtype=np.int64)  # type: ignore[method-assign]
            t0, n = time.process_time(), 0
            for item in selected_calls(reader, decoders, table, *everything, lines):
                if isinstance(item, Call):
                    render.line(decoders.decode(item, Level.CALL), item, start, end)
                    n += 1
                else:
                    n += len(item.texts)
            return time.process_time() - t0, n, lines.memo

        times: dict[bool, list[float]] = {True: [], False: []}
        for r in range(rounds):
            for made in ((True, False) if r % 2 == 0 else (False, True)):
                seconds, n, memo = run(made)
                times[made].append(seconds)
                if made:
                    hits = memo.hits, memo.misses
    load_after = os.getloadavg()
    fast, slow = statistics.median(times[True]), statistics.median(times[False])
    print_rows([("trace", f"shipped capture {name} as recorded: {reader.record_count:,} records, {n:,} lines"),
                ("rounds", f"{rounds}, alternating, in one process; medians of CPU time; load average "
                           f"{load_before[0]:.1f} before, {load_after[0]:.1f} after"),
                ("made without records", f"{fast * 1e3:8.1f} ms CPU  {fast / n * 1e6:5.1f} us a line"),
                ("made by the decoders", f"{slow * 1e3:8.1f} ms CPU  {slow / n * 1e6:5.1f} us a line"),
                ("ratio", f"{fast / slow:.2f}x"),
                ("memo", f"{hits[0]:,} hits, {hits[1]:,} misses ({hits[0] / max(1, sum(hits)) * 100:.1f}% of the "
                         "calls it was asked for)")])
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--trace", help="time this trace as it is")
    parser.add_argument("--shipped", metavar="NAME", help="time the lines of this shipped capture both ways (above)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS), metavar="STEP",
                        help=f"which steps (default all: {', '.join(STEPS)}); the zstd baselines always run")
    parser.add_argument("--no-compile", action="store_true",
                        help="do not write rmtrace's bytecode first (with PYTHONDONTWRITEBYTECODE set, each process "
                             "compiles rmtrace's modules, as the results before 2026-12-02 02:30 UTC were timed)")
    args = parser.parse_args()
    if args.shipped:
        return shipped(args.shipped, args.rounds)
    bytecode = ("as the environment has it (PYTHONDONTWRITEBYTECODE="
                f"{os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r})" if args.no_compile else compile_bytecode())
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        path = columns.bench_trace(args.trace, args.records, tmp)
        for flt, argv in filter_arguments(path).items():  # columns' runner times a command by its name
            columns.COMMANDS[f"show{' ' if flt else ''}{flt}"] = ["show", *argv]
        steps = [s for s in STEPS if s in args.steps or s in ("zstd -dc", columns.BASELINE)]
        times, paired = columns.measure(path, steps, args.rounds, tmp)
        from rmtrace.trace import TraceReader
        with TraceReader(path) as reader:
            n, size = reader.record_count, os.path.getsize(path)
    load_after = os.getloadavg()
    dc, dc_cpu, _ = columns.medians(times["zstd -dc"])
    rows = [*columns.header_rows(n, size, args.trace is not None, args.rounds, load_before, load_after),
            ("bytecode", bytecode),
            ("columns", "wall s | CPU s | x zstd -dc (wall; CPU) | peak RSS | x zstd -dc CPU per round: median [range]")]
    for step in steps:
        sec, cpu, peak = columns.medians(times[step])
        pair = ""
        if step != columns.PAIRED:  # the step over the zstd -dc run right before it, round by round
            mid, low, high = paired_ratio([t["cpu"] for t in times[step]], [t["cpu"] for t in paired[step]])
            verdict = columns.goal_verdict(low, high) if step.startswith("show") else ""
            pair = f"{mid:5.1f}x [{low:.1f}-{high:.1f}] {verdict}"
        rows.append((step, f"{sec:7.2f} s | {cpu:7.2f} s | {sec / dc:6.1f}x; {cpu / dc_cpu:6.1f}x | "
                           f"{peak / 2**20:6.0f} MiB | {pair}"))
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

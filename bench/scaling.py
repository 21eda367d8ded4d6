"""The same steps at several trace sizes: time and peak RSS per record as the trace grows.

    python bench/scaling.py [--sizes 100000 1000000 10000000 | --traces FILE...] [--rounds 2] [--steps ...]

For each size the shipped capture of three CUDA clients in a row is replicated
to that many records (bench/session.py's replicate; with --traces, the traces
given are timed as they are, each its own size: a 10M-record replication takes
longer than the bench), and bench/columns.py's
steps run on it, each in a fresh process (its own CPU time and peak RSS).  The
rounds alternate both the sizes' order and the steps'.  Printed per step: each
size's time per record (wall and CPU) and peak RSS per record, each step's CPU over
the ``zstd -dc`` run timed right before it (bench/columns.py's pairing: the median
and range of the rounds' ratios, which this machine's moving CPU speed leaves
alone), and the largest over the smallest of each across the sizes.

Each step's second line is its CPU per record added from one size to the next:
the start-up, paid once whatever the size, cancels there, so it says whether
the step itself scales (at 100k the start-up is most of a command's time).

Goals (issue 13): time per record within 1.3x across 100k, 1M and 10M
records; peak RSS at most 100 B/record with the columns mapped (the cache
warm).  ``--sizes 100000000 --steps "stats, cache warm"`` is the 100M-record
run (long: it replicates a 2 GB trace and builds its cache first).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from columns import STEPS, measure, medians
from report import paired_ratio, print_rows

DEFAULT_STEPS = ["call table", "table + stats", "fold", "model, cache warm", "stats, cache warm", "wedges, cache warm"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000])
    parser.add_argument("--traces", nargs="+", metavar="FILE", help="time these traces as they are (not replicated)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=DEFAULT_STEPS, metavar="STEP",
                        help=f"which of bench/columns.py's steps (default: {', '.join(DEFAULT_STEPS)})")
    args = parser.parse_args()
    from session import replicate

    from rmtrace import captures
    from rmtrace.trace import TraceReader
    load_before = os.getloadavg()
    source = str(captures.path("cuda-streams-3x-sequential"))
    steps = ["zstd pass", *(s for s in args.steps if s != "zstd pass")]
    given = {}
    for path in args.traces or ():
        with TraceReader(path) as reader:
            given[reader.record_count] = path
    if given:
        args.sizes = sorted(given)
    results: dict[int, dict[str, list[dict[str, float]]]] = {n: {s: [] for s in steps} for n in args.sizes}
    paired: dict[int, dict[str, list[dict[str, float]]]] = {n: {s: [] for s in steps} for n in args.sizes}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        paths = {}
        for n in args.sizes:
            os.mkdir(os.path.join(tmp, str(n)))
            paths[n] = given.get(n) or os.path.join(tmp, str(n), "bench.trace")
            if n not in given:
                replicate(source, paths[n], n)
        for r in range(args.rounds):
            for n in (args.sizes if r % 2 == 0 else args.sizes[::-1]):
                times, before = measure(paths[n], steps if r % 2 == 0 else steps[::-1], 1, os.path.join(tmp, str(n)))
                for step, runs in times.items():
                    results[n][step].extend(runs)
                    paired[n][step].extend(before[step])
    load_after = os.getloadavg()
    rows = [("traces", ", ".join(f"{n:,}" for n in args.sizes) + " records, " + (
                 "as given: " + ", ".join(given.values()) if given else "the shipped 3-client capture replicated")),
            ("rounds", f"{args.rounds}, alternating sizes and steps; medians; load average {load_before[0]:.1f} "
                       f"before, {load_after[0]:.1f} after"),
            ("columns", "per size: wall µs/record, CPU µs/record, peak RSS B/record, x zstd -dc CPU paired: median "
                        "(range of the rounds); then the spread of µs/record (largest / smallest), wall and CPU, and "
                        "of the paired medians")]
    for step in steps:
        figures = {n: medians(results[n][step]) for n in args.sizes}
        # the step over the zstd -dc run right before it, round by round: the CPU's speed of the moment cancels
        ratios = {n: paired_ratio([t["cpu"] for t in results[n][step]], [t["cpu"] for t in paired[n][step]])
                  for n in args.sizes}
        per = [f"{n:,}: {sec / n * 1e6:6.2f} {cpu / n * 1e6:6.2f} {peak / n:6.1f} "
               f"{ratios[n][0]:5.1f}x ({ratios[n][1]:.1f}-{ratios[n][2]:.1f})"
               for n, (sec, cpu, peak) in figures.items()]
        wall = [sec / n for n, (sec, _, _) in figures.items()]
        cpu = [c / n for n, (_, c, _) in figures.items()]
        mids = [ratios[n][0] for n in args.sizes]
        rows.append((step, " | ".join(per) + f" | spread {max(wall) / min(wall):.2f}x, {max(cpu) / min(cpu):.2f}x, "
                                             f"paired {max(mids) / min(mids):.2f}x"))
        if len(args.sizes) > 1:
            rows.append(("  per added record", _added(figures)))
    print_rows(rows)
    return 0


def _added(figures: dict[int, tuple[float, float, float]]) -> str:
    """CPU µs per record between each size and the next: the step's start-up (the interpreter, its imports),
    paid once whatever the size, cancels, so a step that scales linearly shows the same figure at every size."""
    sizes = sorted(figures)
    slopes = [(a, b, (figures[b][1] - figures[a][1]) / (b - a) * 1e6) for a, b in zip(sizes, sizes[1:])]
    parts = [f"{a:,}-{b:,}: {us:6.2f}" for a, b, us in slopes]
    values = [us for _, _, us in slopes]
    spread = f"{max(values) / min(values):.2f}x" if min(values) > 0 else "none (a larger size took less: noise)"
    return "CPU µs/record " + " | ".join(parts) + f" | spread {spread}"


if __name__ == "__main__":
    sys.exit(main())

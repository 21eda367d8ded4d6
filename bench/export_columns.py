"""pcapng and parquet made from the call table: each cold and warm, beside a decode pass of its own in every round.

    python bench/export_columns.py [--records 200000] [--rounds 5] [--memory-records 1000000] [--trace FILE]
                                   [--as-recorded]

Both exports read the trace's call table (``rmtrace.columns.cache``), and
parquet its RM objects as columns: built in the pass when the cache has no
entry for the trace (cold: each pass gets an empty cache directory), loaded
from the entry when it has one (warm: an entry made before the rounds).  A
first export of a trace is the cold pass; another export, or an export after
``rmtrace show`` or ``stats`` of it, the warm one.  The baseline is
``bench/export.py``'s plain decode pass (pair the records, decode each call
at ``Level.CALL``), which reads no cache.  Each pass runs in a fresh
interpreter (``bench/export.py --one``).

Each round runs every step back to back with a baseline pass of its own,
in alternating order (baseline first in one round, last in the next), and
the CPU-time ratio (baseline / step) is taken per round; printed are the
median and range over the rounds (``report.paired_ratio``).  The goal
(issue 13, this task): a median of at least 0.55x with the whole range at or
above 0.5x; "inside the noise" when the range straddles 0.5.  Memory: each
cold export once more at --memory-records records and a tenth of that, its
peak resident memory (the table is written to the cache directory and
mapped, so it should not grow with length).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from export import BASELINE, run_child
from report import paired_ratio, print_rows

ROOT = Path(__file__).resolve().parent.parent
GOAL, FLOOR = 0.55, 0.5
STEPS = (("pcapng", "cold"), ("pcapng", "warm"), ("parquet", "cold"), ("parquet", "warm"))


def verdict(mid: float, low: float, high: float) -> str:
    if mid >= GOAL and low >= FLOOR:
        return "met"
    if high >= FLOOR and low < FLOOR:
        return "inside the noise"
    return "NOT met"


def run(what: str, trace: str, tmp: str, cache: str) -> dict:
    """One pass of ``what`` with ``RMTRACE_CACHE`` at ``cache`` (a fresh directory for "cold")."""
    os.environ["RMTRACE_CACHE"] = tempfile.mkdtemp(dir=tmp) if cache == "cold" else cache
    try:
        return run_child(what, trace, os.path.join(tmp, f"out-{what.split()[0]}"))
    finally:
        if cache == "cold":
            shutil.rmtree(os.environ["RMTRACE_CACHE"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--memory-records", type=int, default=1_000_000, help="0: no memory passes")
    parser.add_argument("--trace", default=str(ROOT / "captures" / "cuda-streams-3x-sequential.trace"))
    parser.add_argument("--as-recorded", action="store_true", help="the trace as recorded, not replicated")
    args = parser.parse_args()
    from session import replicate

    load_at_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        if args.as_recorded:
            trace, what_ran = args.trace, f"{os.path.basename(args.trace)} as recorded"
        else:
            trace = os.path.join(tmp, "speed.trace")
            what_ran = f"{replicate(args.trace, trace, args.records):,} records replicated from {os.path.basename(args.trace)}"
        warm = tempfile.mkdtemp(dir=tmp)
        for what in ("pcapng", "parquet"):  # the warm entry: table, then objects
            run(what, trace, tmp, warm)
        base: dict[tuple[str, str], list[dict]] = {step: [] for step in STEPS}
        step_runs: dict[tuple[str, str], list[dict]] = {step: [] for step in STEPS}
        for r in range(args.rounds):
            for step in STEPS if r % 2 == 0 else reversed(STEPS):
                for what in (BASELINE, step) if r % 2 == 0 else (step, BASELINE):
                    if what == BASELINE:
                        result = run(BASELINE, trace, tmp, "off")
                        base[step].append(result)
                    else:
                        result = run(step[0], trace, tmp, warm if step[1] == "warm" else "cold")
                        step_runs[step].append(result)
                    label = what if what == BASELINE else " ".join(step)
                    print(f"# round {r + 1}: {label}: {result['cpu_seconds']:.2f} s CPU, {result['seconds']:.2f} s wall, "
                          f"{result['maxrss_mb']:.0f} MB; load average {os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
        rows = [("records", f"{what_ran}; {args.rounds} rounds; load average {load_at_start:.2f} at the start, "
                            f"{os.getloadavg()[0]:.2f} at the end")]
        for step in STEPS:
            mid, low, high = paired_ratio([b["cpu_seconds"] for b in base[step]], [s["cpu_seconds"] for s in step_runs[step]])
            wall = paired_ratio([b["seconds"] for b in base[step]], [s["seconds"] for s in step_runs[step]])[0]
            rows.append((" ".join(step), f"{mid:.2f}x the decode pass (CPU; range {low:.2f}-{high:.2f}; "
                                         f"{verdict(mid, low, high)}; wall {wall:.2f}x)"))
        if args.memory_records and not args.as_recorded:
            for n in (args.memory_records // 10, args.memory_records):
                path = os.path.join(tmp, f"memory-{n}.trace")
                replicate(args.trace, path, n)
                for what in (BASELINE, "pcapng", "parquet"):
                    result = run(what, path, tmp, "off" if what == BASELINE else "cold")
                    rows.append((f"peak at {n:,}", f"{what}: {result['maxrss_mb']:.0f} MB ({result['cpu_seconds']:.1f} s CPU)"))
                os.unlink(path)
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

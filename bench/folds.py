"""CPU of the folds over a call table alone: the objects' (what ``rmtrace stats`` folds) and the channels'
(what ``rmtrace wedges`` and the TUI's lanes fold).

    python bench/folds.py TRACE [--fold objects|channels] [--rounds 3]

The call table is built in memory first (with its stash of records, as a cold command builds it), then
the fold runs alone, timed by ``time.process_time`` (CPU: the machine may be shared).  Prints each round's
CPU seconds and their median; compare two trees by running this in each, alternately.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time

from rmtrace.decoders import decoders_for

from rmtrace.columns.cache import built_table
from rmtrace.session.model import fold_channels, fold_objects
from rmtrace.trace import TraceReader


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("--fold", choices=("objects", "channels"), default="objects")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    fold = fold_objects if args.fold == "objects" else fold_channels
    reader = TraceReader(args.trace)
    decoders = decoders_for(reader)
    times = []
    for _ in range(args.rounds):
        table = built_table(reader, decoders, stash=True, params=args.fold == "channels")  # a fold takes its stash
        gc.collect()
        start = time.process_time()
        fold(reader, decoders, table)
        times.append(time.process_time() - start)
        del table
    print(f"{args.fold} fold CPU  " + "  ".join(f"{t:.3f}" for t in times) + f"  median {statistics.median(times):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

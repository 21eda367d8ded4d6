"""CPU of the folds over a call table alone: the objects' (what ``rmtrace stats`` folds) and the channels'
(what ``rmtrace wedges`` and the TUI's lanes fold).

    python bench/folds.py TRACE [--fold objects|channels] [--rounds 3] [--cached]

The call table is built in memory first (with its stash of records; ``--cached``: into a cache entry of a
temporary directory, its columns, clients and processes then mapped, as a cold command with the cache on
builds it), then the fold runs alone, timed by ``time.process_time`` (CPU: the machine may be shared).  Prints each round's
CPU seconds and their median; compare two trees by running this in each, alternately.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rmtrace.decoders import DecoderSet, decoders_for

from rmtrace.columns.cache import build_into, built_table, entry_key
from rmtrace.columns.table import CallTable
from rmtrace.session.model import fold_channels, fold_objects
from rmtrace.trace import TraceReader


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("--fold", choices=("objects", "channels"), default="objects")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cached", action="store_true", help="the table built into a cache entry (mapped)")
    args = parser.parse_args()
    fold = fold_objects if args.fold == "objects" else fold_channels
    reader = TraceReader(args.trace)
    decoders = decoders_for(reader)
    times = []
    params = args.fold == "channels"
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as root:
            if args.cached:
                table = build_into(Path(root), entry_key(reader, decoders), reader, decoders, params=params)
            else:
                table = built_table(reader, decoders, stash=True, params=params)  # a fold takes its stash
            times.append(_timed(fold, reader, decoders, table))
            del table
    print(f"{args.fold} fold CPU  " + "  ".join(f"{t:.3f}" for t in times) + f"  median {statistics.median(times):.3f} s")
    return 0


def _timed(fold: Callable[[TraceReader, DecoderSet, CallTable], object], reader: TraceReader, decoders: DecoderSet,
           table: CallTable) -> float:
    """CPU seconds of one fold of ``table``."""
    gc.collect()
    start = time.process_time()
    fold(reader, decoders, table)
    return time.process_time() - start


if __name__ == "__main__":
    sys.exit(main())

"""Fold a large trace into the session model and ask "state at t" questions.

    python bench/session.py [--records 1000000] [--trace FILE]

The trace is FILE (by default a constructed three-client boot, see
tests/scenarios.py) replicated to --records: each copy shifted in time and
given its own pids, so the model sees many clients.  Printed side by side from
one run: a plain decode pass over the same records (pairing plus name-level
decode: the least any consumer of calls does), the full fold, and 100 random
state_at questions.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from report import print_rows, timed
from rmtrace.decoders import Level, decoders_for

from rmtrace.session import load_session
from rmtrace.trace import TraceReader, TraceWriter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def replicate(source: str, out: str, n: int) -> int:
    with TraceReader(source) as reader:
        records = list(reader)
        meta = reader.meta
    span = records[-1].time_ns - records[0].time_ns + 1_000_000
    written = 0
    with TraceWriter(out, meta) as w:
        copy = 0
        while written < n:
            for rec in records:
                if written >= n:
                    break
                pid = rec.pid + copy * 10_000 if rec.pid else 0
                w.write(replace(rec, pid=pid, tid=rec.tid + copy * 10_000 if rec.tid else 0,
                                time_ns=rec.time_ns + copy * span))
                written += 1
            copy += 1
    return written


def name_pass(reader: TraceReader, decoders) -> int:
    """Pair and name every call (the least a fold must do); how many calls."""
    calls = 0
    for call in decoders.calls(reader.records()):
        decoders.decode(call, Level.NAME)
        calls += 1
    return calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--trace", help="trace to replicate (default: the constructed three-client boot)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        source = args.trace
        if source is None:
            from tests.scenarios import sequential
            source = str(sequential(Path(tmp) / "boot.trace", wedge=True))
        path = os.path.join(tmp, "big.trace")
        n = replicate(source, path, args.records)

        with TraceReader(path) as reader:
            decoders = decoders_for(reader)
            calls, t_decode = timed(name_pass, reader, decoders)
        model, t_fold = timed(load_session, path)
        rng = random.Random(3)
        times = [timed(model.state_at, rng.randrange(model.start_ns, model.end_ns + 1))[1] for _ in range(100)]

    rows = [
        ("records", f"{n:,} ({calls:,} calls, {len(model.clients):,} clients, {len(model.transitions):,} transitions)"),
        ("plain decode pass (baseline)", f"{n / t_decode:>10,.0f} records/s   {t_decode:6.1f} s"),
        ("session fold", f"{n / t_fold:>10,.0f} records/s   {t_fold:6.1f} s   ratio to baseline {t_decode / t_fold:.2f}"),
        ("state at t (100 random t)", f"median {statistics.median(times) * 1e3:.1f} ms, max {max(times) * 1e3:.1f} ms"),
    ]
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

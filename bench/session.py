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
from pathlib import Path

from report import print_rows, timed
from rmtrace.decoders import Level, decoders_for

from rmtrace.record import TIME_OFFSET
from rmtrace.session import load_session
from rmtrace.trace import TraceReader, TraceWriter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def replicate(source: str, out: str, n: int) -> int:
    """Write ``n`` records to ``out``: copies of ``source``, each shifted in time and given pids and tids of its own.

    The copies are patched as bytes (numpy over the header fields, offsets from the record
    mirror), so a 100M-record trace takes minutes, not hours; what the reader sees is what
    rewriting every ``Record`` would give.
    """
    import numpy as np

    from rmtrace.record import RecordHeader, field_offset

    with TraceReader(source) as reader:
        blobs = [bytes(raw) for raw in reader.raw_records()]
        meta = reader.meta
    times = [int.from_bytes(b[TIME_OFFSET:TIME_OFFSET + 8], "little") for b in blobs]
    span = times[-1] - times[0] + 1_000_000
    starts = np.cumsum([0] + [len(b) for b in blobs])
    base = np.frombuffer(b"".join(blobs), dtype=np.uint8)
    fields = {name: (starts[:-1] + field_offset(RecordHeader, name)) for name in ("pid", "tid", "time_ns")}
    pid0 = base.view("<u4")[fields["pid"] // 4]
    tid0 = base.view("<u4")[fields["tid"] // 4]
    written = 0
    with TraceWriter(out, meta) as w:
        copy = 0
        while written < n:
            data = base.copy()
            data.view("<u4")[fields["pid"] // 4] = np.where(pid0 != 0, pid0 + copy * 10_000, 0)
            data.view("<u4")[fields["tid"] // 4] = np.where(tid0 != 0, tid0 + copy * 10_000, 0)
            data.view("<u8")[fields["time_ns"] // 8] += np.uint64(copy * span)
            blob = data.tobytes()
            take = min(len(blobs), n - written)
            for k in range(take):
                w.write_encoded(blob[starts[k]:starts[k + 1]])
            written += take
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

"""Decode throughput: name level and full decode, against a plain struct.unpack pass.

    python bench/decode.py [--records 1000000] [--trace FILE ...]

The records are the committed real captures (captures/*.trace), or, when
there are none yet (or with --synthetic), the synthetic CUDA traffic of
tests/traffic.py (each session 103 records of RM, UVM and system calls built
from the 580.142 profile's layouts), replicated to --records records.  Three
passes over the same record bytes, in the same run, on one core:

* baseline: ``struct.unpack`` of every record header and buffer header (the
  least any reader of the format does);
* name level: decode the record (``decode_record``) and name it
  (``DecoderSet.label``: escape, class, control command; params never parsed);
* full: pair records into calls and decode every call at ``Level.FULL`` (every
  buffer field by field).

Baseline and name level are the best of three runs, full decode one run.
Goal: name level >= 100k records/s, full >= 20k records/s.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/traffic.py

from report import best, print_rows  # noqa: E402
from rmtrace.decoders import DecoderSet, Level, decoders_for  # noqa: E402
from rmtrace.decoders.profiles import load_profile  # noqa: E402

from rmtrace.record import BUFFER, HEADER, HEADER_SIZE, decode_record, encode_record  # noqa: E402
from rmtrace.trace import TraceReader  # noqa: E402

BASELINE = "baseline (struct.unpack)"
GOALS = {"name level": 100_000, "full": 20_000}


def source_records(paths: list[str], synthetic: bool) -> tuple[list[bytes], DecoderSet, str]:
    if paths and not synthetic:
        blobs: list[bytes] = []
        decoders = None
        for path in paths:
            with TraceReader(path) as reader:
                decoders = decoders or decoders_for(reader)
                blobs.extend(bytes(raw) for raw in reader.raw_records())
        return blobs, decoders, f"{len(paths)} real capture(s): {', '.join(os.path.basename(p) for p in paths)}"
    from tests.traffic import sessions
    profile = load_profile("580.142")
    blobs = [encode_record(r) for r in sessions(profile, 20)]
    return blobs, DecoderSet(profile, user=False), "synthetic CUDA sessions (tests/traffic.py), profile 580.142"


def replicate(blobs: list[bytes], n: int) -> list[bytes]:
    return (blobs * (n // len(blobs) + 1))[:n]


def baseline(records: list[bytes]) -> int:
    unpack, unpack_buf = HEADER.unpack_from, BUFFER.unpack_from
    total = 0
    for data in records:
        h = unpack(data)
        pos = HEADER_SIZE
        for _ in range(h[16]):
            b = unpack_buf(data, pos)
            pos += BUFFER.size + ((b[3] + 7) & ~7)
            total += b[0]
    return total


def name_level(records: list[bytes], decoders: DecoderSet) -> int:
    label = decoders.label
    known = 0
    for data in records:
        known += label(decode_record(data)).known
    return known


def full(records: list[bytes], decoders: DecoderSet) -> int:
    decode = decoders.decode
    fields = 0
    for call in decoders.calls(decode_record(data) for data in records):
        fields += len(decode(call, Level.FULL).buffers)
    return fields


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--trace", action="append", default=None, help="captures to use (default: captures/*.trace)")
    parser.add_argument("--synthetic", action="store_true", help="use synthetic traffic even if captures exist")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = args.trace or sorted(glob.glob(os.path.join(root, "captures", "*.trace")))
    blobs, decoders, what = source_records(paths, args.synthetic)
    records = replicate(blobs, args.records)
    size = sum(len(r) for r in records)
    rates = {BASELINE: len(records) / best(baseline, records, repeat=3)}
    rates["name level"] = len(records) / best(name_level, records, decoders, repeat=3)
    rates["full"] = len(records) / best(full, records, decoders)
    rows = [("records", f"{len(records):,} ({size / 1e6:.0f} MB), from {what}")]
    for name, rate in rates.items():
        ratio = "" if name == BASELINE else f"   {rate / rates[BASELINE]:.3f} of baseline"
        goal = GOALS.get(name)
        verdict = "" if goal is None else f"   goal {goal:,}: {'met' if rate >= goal else 'NOT met'}"
        rows.append((name, f"{rate:>12,.0f} rec/s{ratio}{verdict}"))
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

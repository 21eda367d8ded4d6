"""Trace write/read throughput against plain zstd on the same bytes, and seek time.

    python bench/trace_io.py [--records 1000000]

Records are shaped like real RM traffic: enter/exit pairs of RM_CONTROL /
RM_ALLOC / UVM calls with 100-600 byte parameter buffers of small integers
and zero padding.  The baseline is zstd (same level, same chunk size, one
thread) compressing and decompressing exactly the bytes the records occupy,
measured in the same run.  Goal: >= 0.5 of raw zstd speed both ways, a seek
to a random record <= 5 ms.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import struct
import sys
import tempfile

import zstandard
from report import best, print_rows, timed

from rmtrace.record import Buffer, Phase, Record, Role, Source, When, encode_record
from rmtrace.trace import DEFAULT_CHUNK_BYTES, TraceReader, TraceWriter


def realistic_records(n: int, seed: int = 1) -> list[bytes]:
    rng = random.Random(seed)
    templates = []
    for _ in range(400):
        size = rng.randrange(100, 601) & ~3
        words = [rng.choice((0, 0, 0, 1, 2, 0x20, 0xC1D00000 + rng.randrange(64), rng.randrange(1 << 16)))
                 for _ in range(size // 4)]
        templates.append((rng.choice((0x2A, 0x2A, 0x2A, 0x2B, 0x29, 37, 27)), struct.pack(f"<{size // 4}I", *words)))
    out = []
    t = 1_000_000_000
    for i in range(0, n, 2):
        op, params = templates[rng.randrange(len(templates))]
        source = Source.UVM if op < 0x29 else Source.RM
        pid, call = 4000 + (i >> 12) % 3, i // 2
        arg = struct.pack("<IIIIQII", 0xC1D00001, 0x5C000000 + (i & 0xFF), 0x20800102, 0, 0x7FFD0000 + i, len(params), 0)
        for phase, when in ((Phase.ENTER, When.BEFORE), (Phase.EXIT, When.AFTER)):
            t += rng.randrange(500, 40_000)
            bufs = (Buffer(Role.ARG, when, arg), Buffer(Role.PARAMS, when, params, addr=0x7FFD1000 + i))
            out.append(encode_record(Record(source, phase, op=op, time_ns=t, pid=pid, tid=pid + 1, call_id=call, fd=3,
                                            buffers=bufs)))
    return out[:n]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    print(f"generating {args.records:,} records ...", file=sys.stderr)
    records = realistic_records(args.records)
    raw_bytes = sum(len(r) for r in records)

    # Baseline: zstd on the same bytes, in the trace's chunk size, one thread.
    blobs, cur, size = [], [], 0
    for r in records:
        cur.append(r)
        size += len(r)
        if size >= DEFAULT_CHUNK_BYTES:
            blobs.append(b"".join(cur))
            cur, size = [], 0
    if cur:
        blobs.append(b"".join(cur))
    cctx, dctx = zstandard.ZstdCompressor(level=3), zstandard.ZstdDecompressor()
    frames: list[bytes] = []
    zstd_c = best(lambda: frames.__setitem__(slice(None), [cctx.compress(b) for b in blobs]), repeat=args.repeat)
    zstd_d = best(lambda: [dctx.decompress(f) for f in frames], repeat=args.repeat)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.trace")

        def write() -> None:
            with TraceWriter(path, {"backend": "bench"}) as w:
                for r in records:
                    w.write_encoded(r)

        def read_raw() -> None:
            with TraceReader(path) as rd:
                for _ in rd.raw_records():
                    pass

        def read_decoded() -> None:
            with TraceReader(path) as rd:
                for _ in rd:
                    pass

        t_write = best(write, repeat=args.repeat)
        file_size = os.path.getsize(path)
        t_read = best(read_raw, repeat=args.repeat)
        t_decode = best(read_decoded)

        reader, t_open = timed(TraceReader, path)
        rng = random.Random(7)
        seeks = []
        for _ in range(200):
            reader._cache.clear()  # no chunk cache helps: every seek reads and decompresses its chunk
            seeks.append(timed(reader.record_at, rng.randrange(args.records))[1])
        reader.close()

    mb = raw_bytes / 1e6
    rows = [
        ("records", f"{args.records:,} ({mb:,.0f} MB of record bytes)"),
        ("bytes per record", f"{file_size / args.records:.1f} in the file ({raw_bytes / args.records:.0f} raw, "
                             f"ratio {raw_bytes / file_size:.1f}x)"),
        ("zstd compress (baseline)", f"{mb / zstd_c:8.0f} MB/s"),
        ("trace write", f"{mb / t_write:8.0f} MB/s   {args.records / t_write:>12,.0f} rec/s   "
                        f"ratio to zstd {zstd_c / t_write:.2f}"),
        ("zstd decompress (baseline)", f"{mb / zstd_d:8.0f} MB/s"),
        ("trace read (record bytes)", f"{mb / t_read:8.0f} MB/s   {args.records / t_read:>12,.0f} rec/s   "
                                      f"ratio to zstd {zstd_d / t_read:.2f}"),
        ("trace read (decoded Records)", f"{mb / t_decode:8.0f} MB/s   {args.records / t_decode:>12,.0f} rec/s   "
                                         f"ratio to zstd {zstd_d / t_decode:.2f}"),
        ("open (header + index)", f"{t_open * 1e3:.2f} ms"),
        ("seek to a random record", f"median {statistics.median(seeks) * 1e3:.2f} ms, "
                                    f"p99 {sorted(seeks)[int(len(seeks) * 0.99)] * 1e3:.2f} ms "
                                    f"(200 seeks, chunk cache cleared before each)"),
    ]
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The columnar pass and the fold on a large trace, beside zstd.

    python bench/columns.py [--records 1000000] [--trace FILE] [--rounds 3] [--steps ...]

The trace is FILE, or the shipped capture of three CUDA clients in a row
replicated to --records (bench/session.py's replicate: copies shifted in time,
pids of their own).  Every step runs in a fresh process, so each has its own
peak RSS; the rounds alternate the steps' order.  Side by side, per round:

* ``zstd -dc`` of the trace's chunk payloads (the frames concatenated), and a
  plain zstd pass in Python (every chunk read, checked and decompressed);
* the call table built from the chunks (``rmtrace.columns``, no cache);
* the call table and stats' operations table from it;
* the session fold (``load_session``, no cache): the table and the fold over it;
* the fold with the cache cold: the table written to the cache as it is built
  (memory-mapped after), the model stored beside it;
* the model with the cache warm: loaded, not folded;
* stats' operations table with the cache warm.

Each time is the step's own (after its imports); the peak RSS is the
process's, less what it held before the step (the interpreter, numpy and
rmtrace imported, the trace opened).  Goal (issue 13): the fold at 150,000
records/s or more.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from report import print_rows

STEPS = ("zstd -dc", "zstd pass", "call table", "table + stats", "fold", "fold, cache cold", "model, cache warm",
         "stats table, cache warm")
BASELINE = "zstd pass"


def rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def child(step: str, path: str) -> None:
    """One step in this process; prints {"seconds", "rss_kb", "before_kb", "rows"}."""
    from rmtrace.decoders import decoders_for

    from rmtrace.columns.cache import call_table
    from rmtrace.columns.stats import operation_rows
    from rmtrace.session import load_session
    from rmtrace.trace import TraceReader

    reader = TraceReader(path)
    decoders = decoders_for(reader)
    before = rss_kb()
    start = time.perf_counter()
    rows = 0
    if step == "zstd pass":
        for i in range(len(reader.chunks)):
            rows += len(reader.chunk_records(i)[0])
    elif step == "call table":
        rows = len(call_table(reader, decoders, cache=False))
    elif step == "table + stats":
        rows = len(operation_rows(call_table(reader, decoders, cache=False)))
    elif step == "fold":
        rows = len(load_session(reader, decoders=decoders, cache=False).calls)
    elif step in ("fold, cache cold", "model, cache warm"):
        rows = len(load_session(reader, decoders=decoders).calls)
    elif step == "stats table, cache warm":
        rows = len(operation_rows(call_table(reader, decoders)))
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "rss_kb": rss_kb(), "before_kb": before, "rows": rows}))


def run_step(step: str, path: str, frames: str, env: dict[str, str]) -> dict[str, float]:
    if step == "zstd -dc":
        start = time.perf_counter()
        with open(os.devnull, "wb") as sink:
            subprocess.run(["zstd", "-dc", frames], stdout=sink, check=True)
        return {"seconds": time.perf_counter() - start, "rss_kb": 0, "before_kb": 0}
    out = subprocess.run([sys.executable, __file__, "--child", step, path], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"{step} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.splitlines()[-1])


def write_frames(path: str, out: str) -> None:
    """The chunks' zstd frames back to back: what ``zstd -dc`` reads."""
    from rmtrace.chunk import CHUNK_HEADER_SIZE
    from rmtrace.trace import TraceReader
    with TraceReader(path) as reader, open(path, "rb") as f, open(out, "wb") as sink:
        for chunk in reader.chunks:
            f.seek(chunk.offset + CHUNK_HEADER_SIZE)
            sink.write(f.read(chunk.comp_len))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--trace", help="time this trace as it is")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS), metavar="STEP",
                        help=f"which steps (default all: {', '.join(STEPS)}); the zstd pass always runs")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return 0
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        path = args.trace
        if path is None:
            from session import replicate

            from rmtrace import captures
            path = os.path.join(tmp, "bench.trace")
            replicate(str(captures.path("cuda-streams-3x-sequential")), path, args.records)
        frames = os.path.join(tmp, "frames.zst")
        write_frames(path, frames)
        cache = os.path.join(tmp, "cache")
        steps = [s for s in STEPS if s in args.steps or s == BASELINE]
        times: dict[str, list[dict[str, float]]] = {step: [] for step in steps}
        for r in range(args.rounds):
            for step in (steps if r % 2 == 0 else steps[::-1]):
                if step == "fold, cache cold":
                    shutil.rmtree(cache, ignore_errors=True)
                elif "warm" in step and not os.path.isdir(cache):
                    run_step("fold, cache cold", path, frames, {**os.environ, "RMTRACE_CACHE": cache})
                env = {**os.environ, "RMTRACE_CACHE": cache if "cache" in step else "off"}
                times[step].append(run_step(step, path, frames, env))
        from rmtrace.trace import TraceReader
        with TraceReader(path) as reader:
            n, size = reader.record_count, os.path.getsize(path)
    load_after = os.getloadavg()
    base = statistics.median(t["seconds"] for t in times[BASELINE])
    rows = [("trace", f"{n:,} records, {size / 1e6:.0f} MB" + ("" if args.trace else ", the shipped 3-client "
                                                                 "capture replicated")),
            ("rounds", f"{args.rounds}, alternating; medians; load average {load_before[0]:.1f} before, "
                       f"{load_after[0]:.1f} after")]
    for step in steps:
        sec = statistics.median(t["seconds"] for t in times[step])
        peak = max(t["rss_kb"] - t["before_kb"] for t in times[step]) * 1024
        rss = f"   peak RSS +{peak / n:5.1f} B/record" if step != "zstd -dc" else ""
        rows.append((step, f"{sec:7.3f} s  {n / sec:>12,.0f} records/s   {sec / base:5.2f}x the zstd pass{rss}"))
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

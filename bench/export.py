"""Export throughput and memory: every format beside a plain decode pass, in the same run.

    python bench/export.py [--records 1000000] [--rounds 2] [--trace FILE] [--formats jsonl ...]

The trace is FILE (default: the shipped capture of three CUDA clients in a
row) replicated to --records records with ``bench/session.py``'s
``replicate`` (each copy shifted in time, with its own pids), and to a tenth
of that.  Each pass runs in a fresh interpreter, so its peak resident memory
(``ru_maxrss``) is its own:

* the baseline, the plain decode pass the issue names: pair the records
  into calls and decode each at ``Level.CALL`` (name, class or control,
  status, handles, the summary's arguments: what ``rmtrace show`` computes
  for a line); every format's ratio is to it;
* the same at ``Level.FULL`` (every buffer field by field): what jsonl
  (``show --json``) decodes, printed beside jsonl as a second ratio;
* each format: ``rmtrace export`` to a file (parquet: a dataset directory).

Rounds alternate (baseline, formats, then the same in reverse) and the best
time of each counts.  Each pass's time is taken twice: its CPU time (user and
system, ``time.process_time``) and the wall clock.  The goal is judged on CPU
time: on a machine shared with other jobs the wall clock of a single-threaded
pass is mostly how the scheduler shared the cores, while its CPU time is the
work it did; the wall-clock ratio is printed beside it.  Printed: records/s
(CPU), the ratio to the baseline in CPU and in wall time (goal >= 0.5), and
peak memory at both lengths (goal: no growth with length).

A replicated trace repeats its buffers' bytes copy after copy, which the
decoders' parse cache (``rmtrace.decoders.parse.ParseCache``) turns into hits
that a real trace of that length would not all give: each pass that parses
prints its hit rate (and jsonl that of its buffer objects, ``rmtrace.decoders.render.buffer_objects``),
and ``--as-recorded`` runs the passes on the trace as it
was recorded (one length, so no memory comparison) for the ratio there.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from report import print_rows
from rmtrace.decoders import Level

ROOT = Path(__file__).resolve().parent.parent
GOAL = 0.5
BASELINE = "decode (baseline)"
FULL = "decode, every field"
BASELINES = {BASELINE: Level.CALL, FULL: Level.FULL}
"""The decode passes, by the level they decode to (jsonl needs every field)."""
ALSO = {"jsonl": FULL}
"""A second ratio for a format: to the decode pass of the level it needs (jsonl decodes every field)."""


def formats() -> list[str]:
    from rmtrace.export import FORMATS
    return [*FORMATS, "parquet"]


def one_pass(what: str, trace: str, out: str) -> dict:
    """Run one pass in this process (its libraries imported first); what it took and the peak memory."""
    from rmtrace.decoders import decoders_for

    from rmtrace.export import writer
    from rmtrace.export.parquet import export_dataset
    from rmtrace.export.source import ExportInput
    from rmtrace.trace import TraceReader
    write = writer(what) if what not in BASELINES and what != "parquet" else None
    start, cpu = time.perf_counter(), time.process_time()
    if what in BASELINES:
        with TraceReader(trace) as reader:
            decoders = decoders_for(reader)
            level = BASELINES[what]
            count = sum(1 for call in decoders.calls(reader.records()) if decoders.decode(call, level))
    elif what == "parquet":
        count = sum(rows for _path, rows in export_dataset([trace], out, force=True))
    else:
        with ExportInput(trace, progress=False) as src:
            count = write(src, out)
    from rmtrace.decoders.parse import parse_caches
    from rmtrace.decoders.render import BUFFER_OBJECTS
    hits = sum(c.hits for c in parse_caches())
    lookups = hits + sum(c.misses for c in parse_caches())
    return {"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu, "count": count,
            "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "parse_hits": hits / lookups if lookups else None,
            "buffer_object_hits": BUFFER_OBJECTS.hit_rate if BUFFER_OBJECTS.hits + BUFFER_OBJECTS.misses else None}


def run_child(what: str, trace: str, out: str) -> dict:
    cmd = [sys.executable, __file__, "--one", what, trace, out]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--trace", default=str(ROOT / "captures" / "cuda-streams-3x-sequential.trace"))
    parser.add_argument("--formats", nargs="+", choices=formats(), metavar="FORMAT",
                        help="only these formats (the decode passes always run): a quicker run for one format")
    parser.add_argument("--as-recorded", action="store_true",
                        help="the trace as recorded, not replicated: one length, so no memory comparison")
    parser.add_argument("--one", nargs=3, metavar=("WHAT", "TRACE", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_pass(*args.one)))
        return 0
    from session import replicate

    from rmtrace.trace import TraceReader

    names = [BASELINE, FULL, *(args.formats or formats())]
    load_at_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        sizes = {}
        if args.as_recorded:
            with TraceReader(args.trace) as reader:
                small, large = None, reader.record_count
            sizes[large] = (args.trace, large)
        else:
            small, large = args.records // 10, args.records
            for n in (small, large):
                path = os.path.join(tmp, f"big-{n}.trace")
                sizes[n] = (path, replicate(args.trace, path, n))
        best: dict[tuple[str, int], dict] = {}
        for n, (path, _count) in sizes.items():
            rounds = args.rounds if n == large else 1
            for r in range(rounds):
                for what in names if r % 2 == 0 else reversed(names):
                    out = os.path.join(tmp, f"out-{what.split()[0]}")
                    result = run_child(what, path, out)
                    print(f"# {n:,} records, round {r + 1}: {what}: {result['cpu_seconds']:.1f} s CPU, "
                          f"{result['seconds']:.1f} s wall, {result['maxrss_mb']:.0f} MB; load average "
                          f"{os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)  # what a cut-short run had
                    key = (what, n)
                    if key not in best:
                        best[key] = result
                    for measure, keep in (("seconds", min), ("cpu_seconds", min), ("maxrss_mb", max)):
                        best[key][measure] = keep(best[key][measure], result[measure])
    what_ran = (f"{large:,}, {os.path.basename(args.trace)} as recorded" if small is None else
                f"{large:,} (and {small:,} for memory), replicated from {os.path.basename(args.trace)}")
    rows = [("records", f"{what_ran}; best of {args.rounds} alternating rounds; load average {load_at_start:.2f} "
                        f"at the start, {os.getloadavg()[0]:.2f} at the end")]
    for what in names:
        run = best[(what, large)]
        rate = large / run["cpu_seconds"]
        ratio = ""
        if what not in BASELINES:
            base = best[(BASELINE, large)]
            cpu, wall = base["cpu_seconds"] / run["cpu_seconds"], base["seconds"] / run["seconds"]
            ratio = f"   {cpu:.2f}x baseline ({'met' if cpu >= GOAL else 'NOT met'}; wall {wall:.2f}x)"
        also = ""
        if what in ALSO:
            also = f"; {best[(ALSO[what], large)]['cpu_seconds'] / run['cpu_seconds']:.2f}x {ALSO[what]}"
        mem_large = run["maxrss_mb"]
        memory = f"peak {mem_large:5.0f} MB"
        if small is not None:
            mem_small = best[(what, small)]["maxrss_mb"]
            memory = (f"peak {mem_small:5.0f} MB at {small:,}, {mem_large:5.0f} MB at {large:,} "
                      f"({mem_large / mem_small:.2f}x)")
        if run.get("parse_hits") is not None:
            also += f"; parse cache hits {run['parse_hits']:.0%}"
        if run.get("buffer_object_hits") is not None:
            also += f"; buffer objects kept hits {run['buffer_object_hits']:.0%}"
        rows.append((what, f"{rate:>9,.0f} records/s{ratio:<44}   {memory}{also}"))
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

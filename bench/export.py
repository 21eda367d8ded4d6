"""Export throughput and memory: every format beside a plain decode pass, in the same run.

    python bench/export.py [--records 200000] [--rounds 5] [--memory-records 100000 1000000 ...] [--trace FILE]
                           [--formats jsonl ...] [--as-recorded] [--cold]

The trace is FILE (default: the shipped capture of three CUDA clients in a
row) replicated to --records records with ``bench/session.py``'s
``replicate`` (each copy shifted in time, with its own pids).  Each pass runs
in a fresh interpreter, so its peak resident memory (``ru_maxrss``) is its own:

* the baseline, the plain decode pass the issue names: pair the records
  into calls and decode each at ``Level.CALL`` (name, class or control,
  status, handles, the summary's arguments: what ``rmtrace show`` computes
  for a line); every format's ratio is to it;
* the same at ``Level.FULL`` (every buffer field by field): what jsonl
  (``show --json``) decodes, printed beside jsonl as a second ratio;
* each format: ``rmtrace export`` to a file (parquet: a dataset directory).

Speed.  This machine's CPU speed moves by up to 1.5x within seconds, so
ratios of times taken minutes apart are not to be trusted near a goal.  Each
round runs every format back to back with a baseline pass of its own (jsonl:
the baseline, the every-field pass and jsonl), in alternating order (the
baseline first in one round, last in the next), and the ratio is taken per
round; printed are the median and the range of those ratios over the rounds
(``report.paired_ratio``).  A goal is met only when the whole range clears it,
"inside the noise" when the range straddles it.  Each pass's time is taken
twice: its CPU time (user and system, ``time.process_time``), on which the goal
is judged (on a shared machine the wall clock of a single-threaded pass is
mostly how the scheduler shared the cores), and the wall clock, whose paired
median is printed beside it.

Memory.  Each pass runs once more at each of the --memory-records lengths (one
length N: N and a tenth of it; goal: no growth with length); 0 leaves this
out.  ``--rounds 0`` leaves out the timed passes, and with them the decode
passes (a baseline only for a ratio), for a memory line of the chosen formats
alone at lengths where a decode pass would take most of the run.

The cache.  pcapng, perfetto and parquet read the trace's call table (and
parquet its objects) from the cache (``RMTRACE_CACHE``), built by the first
command that needs it.  By default the bench runs parquet (``WARMS``: it builds
both) once on each trace before it times anything, so every timed pass finds the cache warm, as
every command after the first on a trace does; with ``--cold`` each pass
gets an empty cache of its own and builds what it reads, as the first
command on a new trace does.  jsonl and the decode passes read no cache: their
cold and warm passes are the same.

A memory pass's peak is ``ru_maxrss``: every page the process had mapped at
its peak, a mapped column's pages it had read included (the kernel can take
those back: they are the cache's file).  Beside it is the peak of its private
(anonymous) memory alone, sampled from ``/proc/self/smaps_rollup`` every
50 ms.

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
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from report import paired_ratio, print_rows
from rmtrace.decoders import Level

ROOT = Path(__file__).resolve().parent.parent
GOAL = 0.5
BASELINE = "decode (baseline)"
FULL = "decode, every field"
BASELINES = {BASELINE: Level.CALL, FULL: Level.FULL}
"""The decode passes, by the level they decode to (jsonl needs every field)."""
WARMS = "parquet"
"""The pass that leaves the cache warm for every format: parquet builds the call table (all that pcapng and
Perfetto read) and the objects model; one pass of each format did the same in three times the time."""
NO_CACHE = ("jsonl",)
"""Formats that read no cache (jsonl pairs and decodes the records itself): a warm-up pass would only cost
time (at 10M records, minutes), and their cold and warm passes are the same."""
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
    private = _PrivatePeak()
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
            "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "anon_mb": private.stop(),
            "parse_hits": hits / lookups if lookups else None,
            "buffer_object_hits": BUFFER_OBJECTS.hit_rate if BUFFER_OBJECTS.hits + BUFFER_OBJECTS.misses else None}


class _PrivatePeak:
    """The peak of this process's anonymous memory (``smaps_rollup``), sampled by a thread every 50 ms."""

    def __init__(self) -> None:
        import threading
        self.peak_kb = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while True:
            with open("/proc/self/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Anonymous:"):
                        self.peak_kb = max(self.peak_kb, int(line.split()[1]))
            if self._done.wait(0.05):
                return

    def stop(self) -> float:
        self._done.set()
        self._thread.join()
        return self.peak_kb / 1024


def run_child(what: str, trace: str, out: str, cache: str) -> dict:
    cmd = [sys.executable, __file__, "--one", what, trace, out]
    env = {**os.environ, "RMTRACE_CACHE": cache}
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if done.returncode:
        raise SystemExit(f"export.py: {' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def verdict(low: float, high: float) -> str:
    """What a range of per-round ratios says of the goal."""
    return "met" if low >= GOAL else "NOT met" if high < GOAL else "inside the noise"


def groups(names: list[str]) -> list[list[str]]:
    """The passes of one round, each format with a baseline pass of its own beside it."""
    return [[BASELINE, *([ALSO[what]] if what in ALSO else []), what] for what in names]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000, help="the length of the timed passes")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--memory-records", type=int, nargs="+", default=[1_000_000],
                        help="the lengths of the memory passes (one length: it and a tenth of it; 0: none)")
    parser.add_argument("--trace", default=str(ROOT / "captures" / "cuda-streams-3x-sequential.trace"))
    parser.add_argument("--formats", nargs="+", choices=formats(), metavar="FORMAT",
                        help="only these formats (the decode passes always run): a quicker run for one format")
    parser.add_argument("--as-recorded", action="store_true",
                        help="the trace as recorded, not replicated: one length, so no memory comparison")
    parser.add_argument("--cold", action="store_true",
                        help="each pass with an empty cache of its own (it builds the call table it reads)")
    parser.add_argument("--one", nargs=3, metavar=("WHAT", "TRACE", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_pass(*args.one)))
        return 0
    from session import replicate

    from rmtrace.trace import TraceReader

    chosen = args.formats or formats()
    every = [*([BASELINE, *dict.fromkeys(ALSO[w] for w in chosen if w in ALSO)] if args.rounds else []), *chosen]
    load_at_start = os.getloadavg()[0]

    passes = 0

    def cache() -> str:
        """Where a pass's cache is: a new empty one with --cold, else the one the formats have run once on."""
        nonlocal passes
        passes += 1
        return os.path.join(tmp, f"cache-{passes}" if args.cold else "cache")

    def warm(path: str) -> None:
        """With a warm cache: one untimed pass on ``path`` that builds what every format reads (``WARMS``)."""
        if not args.cold and any(what not in NO_CACHE for what in chosen):
            run_child(WARMS, path, os.path.join(tmp, "out-warm"), cache())

    def one(what: str, path: str, n: int, label: str) -> dict:
        result = run_child(what, path, os.path.join(tmp, f"out-{what.split()[0]}"), cache())
        print(f"# {n:,} records, {label}: {what}: {result['cpu_seconds']:.2f} s CPU, {result['seconds']:.2f} s wall, "
              f"{result['maxrss_mb']:.0f} MB ({result['anon_mb']:.0f} private); load average {os.getloadavg()[0]:.2f}",
              file=sys.stderr, flush=True)  # what a cut-short run had
        return result

    with tempfile.TemporaryDirectory() as tmp:
        if args.as_recorded:
            path = args.trace
            with TraceReader(path) as reader:
                timed_n = reader.record_count
        else:
            path = os.path.join(tmp, f"big-{args.records}.trace")
            timed_n = replicate(args.trace, path, args.records)
        if args.rounds:
            warm(path)
        # runs[format] = [(its baseline's passes by name, its own pass)] per round
        runs: dict[str, list[dict[str, dict]]] = {what: [] for what in chosen}
        for r in range(args.rounds):
            for group in groups(chosen):
                order = group if r % 2 == 0 else group[::-1]
                runs[group[-1]].append({what: one(what, path, timed_n, f"round {r + 1}") for what in order})
        memory: dict[tuple[str, int], dict] = {}
        asked = [n for n in args.memory_records if n]
        lengths = [] if args.as_recorded or not asked else [asked[0] // 10, asked[0]] if len(asked) == 1 else sorted(asked)
        for n in lengths:
            mem_path = os.path.join(tmp, f"mem-{n}.trace")
            count = replicate(args.trace, mem_path, n)
            warm(mem_path)
            for what in every:
                memory[(what, n)] = one(what, mem_path, count, "memory")
            os.unlink(mem_path)
    what_ran = (f"{timed_n:,}, {os.path.basename(args.trace)} as recorded" if args.as_recorded else
                f"{timed_n:,}, replicated from {os.path.basename(args.trace)}")
    rounds = (f"{args.rounds} rounds, each format beside its own baseline pass, in alternating order" if args.rounds
              else "no timed passes (--rounds 0), the memory passes alone")
    rows = [("records", f"{what_ran}; {rounds}; cache {'cold (each pass builds what it reads)' if args.cold else 'warm'}; "
                        f"load average {load_at_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")]

    def median(what: str, measure: str) -> float:
        return statistics.median(rnd[what][measure] for pairs in runs.values() for rnd in pairs if what in rnd)

    def timed_line(what: str) -> str:
        """A format's speed: records per second and its ratios to its baseline passes, per round."""
        rate = timed_n / median(what, "cpu_seconds")
        text = f"{rate:>9,.0f} records/s (median CPU)"
        pairs = runs.get(what)
        if pairs is not None:
            mid, low, high = paired_ratio([p[BASELINE]["cpu_seconds"] for p in pairs], [p[what]["cpu_seconds"] for p in pairs])
            wall = paired_ratio([p[BASELINE]["seconds"] for p in pairs], [p[what]["seconds"] for p in pairs])[0]
            text += f"   {mid:.2f}x baseline, range {low:.2f}-{high:.2f} ({verdict(low, high)}; wall {wall:.2f}x)"
            if what in ALSO:
                full = paired_ratio([p[ALSO[what]]["cpu_seconds"] for p in pairs], [p[what]["cpu_seconds"] for p in pairs])
                text += f"; {full[0]:.2f}x {ALSO[what]} ({full[1]:.2f}-{full[2]:.2f})"
        last = next(rnd[what] for pairs in runs.values() for rnd in pairs if what in rnd)
        if last.get("parse_hits") is not None:
            text += f"; parse cache hits {last['parse_hits']:.0%}"
        if last.get("buffer_object_hits") is not None:
            text += f"; buffer objects kept hits {last['buffer_object_hits']:.0%}"
        return text

    for what in every:
        rows.append((what, timed_line(what) if args.rounds else ""))
        if lengths:
            peaks = [memory[(what, n)]["maxrss_mb"] for n in lengths]
            private = [memory[(what, n)]["anon_mb"] for n in lengths]
            steps = ", ".join(f"{b / a:.2f}x" for a, b in zip(peaks, peaks[1:]))
            private_steps = ", ".join(f"{b / a:.2f}x" for a, b in zip(private, private[1:]))
            rows.append(("", "peak " + ", ".join(f"{mb:5.0f} MB at {n:,}" for mb, n in zip(peaks, lengths))
                             + f" ({steps} length to length)"))
            rows.append(("", "private " + ", ".join(f"{mb:5.0f} MB at {n:,}" for mb, n in zip(private, lengths))
                             + f" ({private_steps})"))
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

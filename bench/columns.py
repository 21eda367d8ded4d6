"""The columnar pass, the fold and the commands on a large trace, beside zstd.

    python bench/columns.py [--records 1000000] [--trace FILE] [--rounds 3] [--steps ...] [--min-available GIB]

The trace is FILE, or the shipped capture of three CUDA clients in a row
replicated to --records (bench/session.py's replicate: copies shifted in time,
pids of their own).  Every step runs in a fresh process, so each has its own
CPU time and peak RSS (``os.wait4``); the rounds alternate the steps' order.
Side by side, per round:

* ``zstd -dc`` of the trace's chunk payloads (the frames concatenated), and a
  plain zstd pass in Python (every chunk read, checked and decompressed);
* the call table built from the chunks (``rmtrace.columns``, no cache);
* the call table and stats' operations table from it (each row's dict made and dropped, as the
  command prints them);
* the session fold (``load_session``, no cache): the table and the fold over it;
* the fold with the cache cold: the table written to the cache as it is built
  (memory-mapped after), the model stored beside it;
* the model with the cache warm: loaded, not folded;
* stats' operations table with the cache warm;
* the commands as a user runs them, each a whole ``rmtrace`` process
  (interpreter start and imports included), with the cache off, cold (an
  empty cache: the table is written to it as it is built, and mapped) and warm:
  ``stats --json``, ``wedges --json``, ``show`` (every call, to /dev/null) and
  ``show --failed``; and ``info`` (record counts from the headers; it reads no cache).

A library step's time is its own (after its imports, the trace opened); its
peak RSS is the process's less what it held before the step.  A command's
time and RSS are the whole process's.  Times are wall and CPU (user + system):
on a shared machine CPU seconds are the steadier figure, and both are printed.
Goals (issue 13): the fold at 150,000 records/s or more; stats, wedges and
show within 10x of ``zstd -dc``.

This machine's CPU speed moves by up to 1.5x within seconds, so a ratio of two
medians taken minutes apart is not to be trusted near a goal: each step is
timed right after a ``zstd -dc`` run of its own, and the last column is the
median and range of those per-round CPU ratios (``report.paired_ratio``).  A
goal is met only when the whole range clears it; a goal inside the range is
"inside the noise".
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

from report import paired_ratio, print_rows

from rmtrace.exitcodes import ExitCode

COMMANDS = {
    "stats": ["stats", "--json"], "wedges": ["wedges", "--json"], "show": ["show"], "show --failed": ["show", "--failed"],
    "info": ["info"],
}
"""The commands timed as a user runs them: the arguments before the trace."""
CACHELESS = ("info",)
"""Commands that read no cache (timed once, without the cache variants)."""
FINE = {"wedges": (ExitCode.OK, ExitCode.FOUND, ExitCode.WEDGED)}
"""Exit codes besides OK a command ends with when it worked (docs' exit code table: wedges found)."""
STEPS = ("zstd -dc", "zstd pass", "call table", "table + stats", "fold", "fold, cache cold", "model, cache warm",
         "stats table, cache warm",
         *(f"{command}{cache}" for command in COMMANDS
           for cache in (("",) if command in CACHELESS else ("", ", cache cold", ", cache warm"))))
BASELINE = "zstd pass"
PAIRED = "zstd -dc"
"""The baseline each step is timed right after, in every round (the per-round ratios)."""
GOAL = 10.0
"""Issue 13: stats, wedges and show within this many times ``zstd -dc``'s CPU."""
GOAL_STEPS = ("stats", "wedges", "show")
"""The commands the goal is for (as a user runs them: with the cache off, cold or warm)."""

def rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def child(step: str, path: str) -> None:
    """One step in this process; prints {"seconds", "cpu", "rss_kb", "before_kb", "rows"}."""
    from rmtrace.decoders import decoders_for

    from rmtrace.columns.cache import call_table
    from rmtrace.columns.stats import operations
    from rmtrace.session import load_session
    from rmtrace.trace import TraceReader

    reader = TraceReader(path)
    decoders = decoders_for(reader)
    before, cpu_before = rss_kb(), time.process_time()
    start = time.perf_counter()
    rows = 0
    if step == "zstd pass":
        for i in range(len(reader.chunks)):
            rows += len(reader.chunk_records(i)[0])
    elif step == "call table":
        rows = len(call_table(reader, decoders, cache=False))
    elif step == "table + stats":  # every row made and let go of, as the command prints them
        rows = sum(1 for _ in operations(call_table(reader, decoders, cache=False)).rows())
    elif step == "fold":
        rows = len(load_session(reader, decoders=decoders, cache=False).calls)
    elif step in ("fold, cache cold", "model, cache warm"):
        rows = len(load_session(reader, decoders=decoders).calls)
    elif step == "stats table, cache warm":
        rows = sum(1 for _ in operations(call_table(reader, decoders)).rows())
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "cpu": time.process_time() - cpu_before, "rss_kb": rss_kb(),
                      "before_kb": before, "rows": rows}))


def run_step(step: str, path: str, frames: str, env: dict[str, str], min_available: int = 0) -> dict[str, float]:
    """Run one step in a fresh process: {"seconds", "cpu", "rss_kb", "before_kb"} (a library step's own
    figures, from the child; a command's, the whole process's from its rusage)."""
    command = step.removesuffix(", cache warm").removesuffix(", cache cold")
    if step == "zstd -dc":
        argv = ["zstd", "-dc", frames]
    elif command in COMMANDS:
        argv = [os.path.join(os.path.dirname(sys.executable), "rmtrace"), *COMMANDS[command], path]
    else:
        argv = [sys.executable, __file__, "--child", step, path]
    library = argv[1:2] == [__file__]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out if library else subprocess.DEVNULL, stderr=err, env=env)
        status, usage = wait_watched(proc, step, min_available)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode not in FINE.get(command, (ExitCode.OK,)):
            err.seek(0)
            raise SystemExit(f"{step} failed (exit {proc.returncode}):\n{err.read()[-3000:].decode(errors='replace')}")
        if not library:
            return {"seconds": seconds, "cpu": usage.ru_utime + usage.ru_stime, "rss_kb": usage.ru_maxrss,
                    "before_kb": 0}
        out.seek(0)
        return json.loads(out.read().decode().splitlines()[-1])


def mem_available() -> int:
    """/proc/meminfo's MemAvailable, in bytes."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise OSError("no MemAvailable in /proc/meminfo")


def wait_watched(proc: subprocess.Popen, step: str, min_available: int) -> tuple[int, resource.struct_rusage]:
    """``os.wait4`` of the step's process; with ``min_available`` (bytes), polling the machine's
    MemAvailable meanwhile, and killing the step (and saying so) before it takes a shared machine down."""
    if not min_available:
        _, status, usage = os.wait4(proc.pid, 0)
        return status, usage
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            return status, usage
        available = mem_available()
        if available < min_available:
            proc.kill()
            os.wait4(proc.pid, 0)
            raise SystemExit(f"{step}: KILLED by the watchdog: MemAvailable {available / 2**30:.2f} GiB < "
                             f"{min_available / 2**30:.2f} GiB (--min-available)")
        time.sleep(0.5)


def write_frames(path: str, out: str) -> None:
    """The chunks' zstd frames back to back: what ``zstd -dc`` reads."""
    from rmtrace.chunk import CHUNK_HEADER_SIZE
    from rmtrace.trace import TraceReader
    with TraceReader(path) as reader, open(path, "rb") as f, open(out, "wb") as sink:
        for chunk in reader.chunks:
            f.seek(chunk.offset + CHUNK_HEADER_SIZE)
            sink.write(f.read(chunk.comp_len))


def measure(path: str, steps: list[str], rounds: int, tmp: str, min_available: int = 0
            ) -> tuple[dict[str, list[dict[str, float]]], dict[str, list[dict[str, float]]]]:
    """Each of ``steps`` ``rounds`` times on the trace ``path``, the rounds alternating their order (the
    cache under ``tmp``: emptied for the cold fold, filled before a warm step; ``min_available``: the
    watchdog's floor, ``wait_watched``); and each step's ``PAIRED`` runs, one right before each of its runs."""
    frames = os.path.join(tmp, "frames.zst")
    write_frames(path, frames)
    cache = os.path.join(tmp, "cache")
    times: dict[str, list[dict[str, float]]] = {step: [] for step in steps}
    paired: dict[str, list[dict[str, float]]] = {step: [] for step in steps}
    warm = False  # whether the cache holds the table and the model (a cold step may leave only the table)
    for r in range(rounds):
        for step in (steps if r % 2 == 0 else steps[::-1]):
            if step.endswith(", cache cold"):
                shutil.rmtree(cache, ignore_errors=True)
                warm = False
            elif "warm" in step and not warm:
                shutil.rmtree(cache, ignore_errors=True)
                run_step("fold, cache cold", path, frames, {**os.environ, "RMTRACE_CACHE": cache}, min_available)
                warm = True
            env = {**os.environ, "RMTRACE_CACHE": cache if "cache" in step else "off"}
            if step != PAIRED:  # its baseline seconds before it, at the CPU's speed of the moment
                paired[step].append(run_step(PAIRED, path, frames, env, min_available))
            times[step].append(run_step(step, path, frames, env, min_available))
            warm = warm or step == "fold, cache cold"  # it stores the model
            print(f"round {r + 1}: {step}: {json.dumps(times[step][-1])}", file=sys.stderr, flush=True)
    return times, paired


def goal_verdict(low: float, high: float) -> str:
    """Whether the per-round ratios' range clears ``GOAL``."""
    if high <= GOAL:
        return f"goal {GOAL:g}x met"
    return f"goal {GOAL:g}x inside the noise" if low <= GOAL else f"goal {GOAL:g}x NOT met"


def medians(runs: list[dict[str, float]]) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS bytes): the medians of the times, the largest RSS."""
    return (statistics.median(t["seconds"] for t in runs), statistics.median(t["cpu"] for t in runs),
            max(t["rss_kb"] - t["before_kb"] for t in runs) * 1024)


def header_rows(n: int, size: int, given: bool, rounds: int, load_before: tuple[float, ...],
                load_after: tuple[float, ...]) -> list[tuple[str, str]]:
    """The rows a bench's table starts with: the trace timed (``given``: as it was, not replicated) and the rounds."""
    return [("trace", f"{n:,} records, {size / 1e6:.0f} MB" + ("" if given else ", the shipped 3-client capture "
                                                              "replicated")),
            ("rounds", f"{rounds}, alternating; medians; load average {load_before[0]:.1f} before, "
                       f"{load_after[0]:.1f} after")]

def bench_trace(given: str | None, records: int, tmp: str) -> str:
    """The trace a bench times: ``given`` as it is, or the shipped 3-client capture replicated to ``records``."""
    if given is not None:
        return given
    from session import replicate

    from rmtrace import captures
    path = os.path.join(tmp, "bench.trace")
    replicate(str(captures.path("cuda-streams-3x-sequential")), path, records)
    return path

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--trace", help="time this trace as it is")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS), metavar="STEP",
                        help=f"which steps (default all: {', '.join(STEPS)}); zstd -dc and the zstd pass always run")
    parser.add_argument("--min-available", type=float, default=0, metavar="GIB",
                        help="kill a step (and stop) when MemAvailable falls below GIB GiB (default: never)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return 0
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        path = bench_trace(args.trace, args.records, tmp)
        steps = [s for s in STEPS if s in args.steps or s in ("zstd -dc", BASELINE)]
        times, paired = measure(path, steps, args.rounds, tmp, int(args.min_available * 2**30))
        from rmtrace.trace import TraceReader
        with TraceReader(path) as reader:
            n, size = reader.record_count, os.path.getsize(path)
    load_after = os.getloadavg()
    base, base_cpu, _ = medians(times[BASELINE])
    dc, dc_cpu, _ = medians(times["zstd -dc"])
    rows = [*header_rows(n, size, args.trace is not None, args.rounds, load_before, load_after),
            ("columns", "wall s, records/s (wall) | CPU s, records/s (CPU) | x zstd pass, x zstd -dc (wall; CPU) "
                        "| peak RSS | x zstd -dc CPU paired: median (range of the rounds)")]
    for step in steps:
        sec, cpu, peak = medians(times[step])
        rss = f"  +{peak / n:6.1f} B/record" if step != PAIRED else ""
        pair = ""
        if step != PAIRED:
            # the step over its zstd -dc: how many times the baseline it took, round by round
            mid, low, high = paired_ratio([t["cpu"] for t in times[step]], [t["cpu"] for t in paired[step]])
            pair = f" | {mid:5.1f}x ({low:.1f}-{high:.1f})"
            if step.split(",")[0] in GOAL_STEPS:
                pair += f" {goal_verdict(low, high)}"
        rows.append((step, f"{sec:7.2f} s {n / sec:>10,.0f}/s | {cpu:7.2f} s {n / cpu:>10,.0f}/s | "
                           f"{sec / base:5.1f}x {sec / dc:5.1f}x; {cpu / base_cpu:5.1f}x {cpu / dc_cpu:5.1f}x |{rss}{pair}"))
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

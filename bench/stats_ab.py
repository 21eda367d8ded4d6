"""``rmtrace stats`` (text and ``--json``) of two installs of rmtrace, A/B, beside ``zstd -dc``.

    python bench/stats_ab.py --trace FILE [--base VENV] [--rounds 4] [--caches cold warm off] [--modes text json]

Each step is a whole ``rmtrace stats`` process as a user runs it (interpreter
start and imports included), its output to /dev/null, with the cache cold (an
empty cache directory of its own), warm (that directory filled by one run
first) or off (``RMTRACE_CACHE=off``).  ``--base`` names another install's
virtual environment (a worktree of main with its own venv): each step then
runs with both, one right after the other, and the rounds alternate which goes
first and the order of the steps.  Every run is timed right after a ``zstd -dc``
run of the trace's chunk frames (bench/columns.py's ``write_frames``), so each
has its own paired ratio (``report.paired_ratio``): this machine's CPU speed
moves within seconds, and the ratios of runs seconds apart are the steadier
figure.  Times are CPU seconds (user + system, ``os.wait4``); the wall time is
printed too.  Goal (issue 13): stats within 10x of ``zstd -dc``'s CPU.

For timings as an installed rmtrace runs, compile the trees' bytecode first
(``unset PYTHONDONTWRITEBYTECODE; python -m compileall -q rmtrace decoders replayer tui``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from columns import write_frames
from report import paired_ratio, print_rows

MODES = {"text": [], "json": ["--json"]}
CACHES = ("cold", "warm", "off")


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one process, its output discarded (it must exit 0)."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(argv)} failed:\n{err.read()[-3000:].decode(errors='replace')}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", required=True)
    parser.add_argument("--base", metavar="VENV", help="the other install's virtual environment (A/B)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--caches", nargs="+", choices=CACHES, default=["cold", "warm"])
    parser.add_argument("--modes", nargs="+", choices=sorted(MODES), default=["text", "json"])
    args = parser.parse_args()
    trees = {"new": os.path.dirname(sys.executable)}
    if args.base:
        trees = {"base": os.path.join(args.base, "bin"), **trees}
    steps = [(mode, cache) for cache in args.caches for mode in args.modes]
    print(f"$ python bench/stats_ab.py {' '.join(sys.argv[1:])}")
    print(f"trace {args.trace}, {args.rounds} rounds, load average {os.getloadavg()[0]:.2f} at the start")
    runs: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    zstd: dict[tuple[str, str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="stats-ab-", dir=os.environ.get("BENCH_TMP")) as tmp:
        frames = os.path.join(tmp, "frames.zst")
        write_frames(args.trace, frames)
        caches = {tree: os.path.join(tmp, f"cache-{tree}") for tree in trees}
        filled = set()
        for r in range(args.rounds):
            for mode, cache in (steps if r % 2 == 0 else steps[::-1]):
                for tree in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
                    env = dict(os.environ, RMTRACE_CACHE="off" if cache == "off" else caches[tree])
                    argv = [os.path.join(trees[tree], "rmtrace"), "stats", *MODES[mode], args.trace]
                    if cache == "cold":
                        shutil.rmtree(caches[tree], ignore_errors=True)
                        filled.discard(tree)
                    elif cache == "warm" and tree not in filled:
                        run_once(argv, env)
                        filled.add(tree)
                    zstd.setdefault((tree, mode, cache), []).append(run_once(["zstd", "-dc", frames], env)[1])
                    runs.setdefault((tree, mode, cache), []).append(run_once(argv, env))
                    if cache == "cold":
                        filled.add(tree)  # it wrote the cache as it built the table and the model
    rows = [("stats", "wall s   CPU s  (medians) | x zstd -dc CPU paired: median (range) | new / base CPU per round")]
    for mode, cache in steps:
        for tree in trees:
            key = (tree, mode, cache)
            wall = statistics.median(w for w, _ in runs[key])
            cpu = [c for _, c in runs[key]]
            med, lo, hi = paired_ratio(cpu, zstd[key])
            line = f"{wall:6.2f}  {statistics.median(cpu):6.2f}  | {med:5.1f}x ({lo:.1f}-{hi:.1f})"
            if tree == "new" and args.base:
                ab, ab_lo, ab_hi = paired_ratio(cpu, [c for _, c in runs[("base", mode, cache)]])
                line += f" | {ab:.3f} ({ab_lo:.3f}-{ab_hi:.3f})"
            rows.append((f"{tree} {mode}, cache {cache}", line))
    rows.append(("zstd -dc", f"        {statistics.median(c for cs in zstd.values() for c in cs):6.2f}"))
    print_rows(rows)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()

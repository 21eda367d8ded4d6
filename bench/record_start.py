"""What `rmtrace record` adds to a command's run time: ``rmtrace record -- true`` beside ``true``.

Alternating rounds of the bare command and the recorded one, each a fresh process,
wall time from spawn to exit (the recorder's start-up, the trace's write and close,
its shutdown).  The difference of the medians is what recording costs a run that does
nothing; goal <= 0.15 s.  A warm-up round of each comes first, and PYTHONDONTWRITEBYTECODE
is dropped from the environment, so the figures are a user's second run, not a compile
of every module.

  python bench/record_start.py [--rounds 15] [-o bench/results/record_start-local.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"{shlex.join(cmd)} failed ({proc.returncode}): {proc.stderr}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--rmtrace", default=f"{sys.executable} -m rmtrace.cli.main", help="how to run rmtrace")
    parser.add_argument("--command", default="true", help="the command recorded (default: true)")
    parser.add_argument("-o", "--output", help="also write the results here")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    bare = shlex.split(args.command)
    with tempfile.TemporaryDirectory(prefix="rmtrace-start-") as tmp:
        def recorded(n: int) -> list[str]:
            return [*shlex.split(args.rmtrace), "record", "-o", str(Path(tmp) / f"{n}.trace"), "--", *bare]
        timed(bare, env)
        timed(recorded(-1), env)
        times: dict[str, list[float]] = {"bare": [], "recorded": []}
        for n in range(args.rounds):
            times["bare"].append(timed(bare, env))
            times["recorded"].append(timed(recorded(n), env))
    med = {k: statistics.median(v) for k, v in times.items()}
    added = med["recorded"] - med["bare"]
    load = os.getloadavg()
    lines = [f"# rmtrace record start-up and shutdown: `{args.command}` bare and recorded", "",
             f"command: `python bench/record_start.py {shlex.join(sys.argv[1:])}`",
             f"machine: {platform.node()}, {platform.machine()}, kernel {platform.release()}, {os.cpu_count()} CPUs, "
             f"Python {platform.python_version()}; load average after the run {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
             f"medians of {args.rounds} alternating rounds (after one warm-up round of each)", "",
             "| way | median wall | min | max |", "| --- | --- | --- | --- |"]
    for way, values in times.items():
        lines.append(f"| {way} | {med[way] * 1e3:.1f} ms | {min(values) * 1e3:.1f} ms | {max(values) * 1e3:.1f} ms |")
    lines += ["", f"added by recording: {added * 1e3:+.1f} ms (goal: <= 150 ms)"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        Path(args.output).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

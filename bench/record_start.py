"""What `rmtrace record` adds to a command's run time: ``rmtrace record -- true`` beside ``true``.

Alternating rounds of the bare command and the recorded one, each a fresh process,
wall time from spawn to exit (the recorder's start-up, the trace's write and close,
its shutdown).  The difference of the medians is what recording costs a run that does
nothing; goal <= 0.15 s.  A warm-up round of each comes first, and PYTHONDONTWRITEBYTECODE
is dropped from the environment, and each tree has a user cache of its own that the warm-up
fills, so the figures are a user's second run, not a compile of every module.

``python -c pass`` is the floor under every way that runs rmtrace: the interpreter and its
site (in a development checkout, that includes the editable install's import hook, which a
wheel install has not).  Two ways record: ``rmtrace record`` as the command line runs it,
and the record command's module alone (``rmtrace.cli.record``'s parser and run, nothing else
imported): what the recorder itself costs, apart from the command line finding the command
and building its parser (rmtrace/cli/main.py).  Each ``--before DIR`` adds both ways once more with DIR
first on PYTHONPATH (DIR holding an rmtrace/ as an install lays it out: an older one, or this one
installed rather than editable): the change against it, in the same rounds.

  python bench/record_start.py [--rounds 15] [-o bench/results/record_start-local.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from report import paired_ratio

ALONE = """import argparse, sys
import rmtrace.cli.record as command
parser = argparse.ArgumentParser(prog="rmtrace record")
command.add_arguments(parser)
sys.exit(command.run(parser.parse_args()))"""
"""The record command with nothing of the command line's but its own parser."""


def timed(cmd: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the run's processes): on a loaded machine the CPU time says
    what the run itself costs, the wall time what it costs together with everything else.  In
    cwd: ``python -c`` puts the working directory first on sys.path, and a checkout's rmtrace/
    there would shadow ``--before``'s."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"{shlex.join(cmd)} failed ({proc.returncode}): {proc.stderr}")
    return seconds, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--rmtrace", default=f"{sys.executable} -m rmtrace.cli.main", help="how to run rmtrace")
    parser.add_argument("--command", default="true", help="the command recorded (default: true)")
    parser.add_argument("--before", metavar="DIR", action="append", default=[],
                        help="also time both recording ways with DIR's rmtrace/ (repeatable)")
    parser.add_argument("-o", "--output", help="also write the results here")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    bare = shlex.split(args.command)
    with tempfile.TemporaryDirectory(prefix="rmtrace-start-") as tmp:
        def cli(prefix: str) -> Callable[[int], list[str]]:
            return lambda n: [*shlex.split(args.rmtrace), "record", "-o", str(Path(tmp) / f"{prefix}cli-{n}.trace"),
                              "--", *bare]

        def alone(prefix: str) -> Callable[[int], list[str]]:
            return lambda n: [sys.executable, "-c", ALONE, "-o", str(Path(tmp) / f"{prefix}alone-{n}.trace"), "--",
                              *bare]

        ways: dict[str, Callable[[int], list[str]]] = {
            "bare": lambda n: bare, "python -c pass": lambda n: [sys.executable, "-c", "pass"],
            "rmtrace record": cli(""), "record command alone": alone("")}
        # Each tree its own user cache (RMTRACE_CACHE_DIR): the cached layouts and capture tables are keyed by
        # their sources' CRCs, so trees whose sources differ, sharing one, would rewrite each other's entries
        # round after round and every run would pay for deriving them (construct's import among it).
        mine_env = dict(env, RMTRACE_CACHE_DIR=str(Path(tmp) / "cache"))
        envs = {name: mine_env for name in ways}
        for k, before in enumerate(args.before):
            before_env = dict(env, PYTHONPATH=os.pathsep.join(filter(None, (before, env.get("PYTHONPATH")))),
                              RMTRACE_CACHE_DIR=str(Path(tmp) / f"cache-before{k}"))
            ways[f"rmtrace record, {before}'s rmtrace/"] = cli(f"before{k}-")
            ways[f"record command alone, {before}'s rmtrace/"] = alone(f"before{k}-")
            envs[f"rmtrace record, {before}'s rmtrace/"] = envs[f"record command alone, {before}'s rmtrace/"] = before_env
        for name, make in ways.items():
            timed(make(-1), envs[name], tmp)
        times: dict[str, list[float]] = {name: [] for name in ways}
        cpu: dict[str, list[float]] = {name: [] for name in ways}
        load_before = os.getloadavg()
        for n in range(args.rounds):
            for name, make in ways.items():
                wall, used = timed(make(n), envs[name], tmp)
                times[name].append(wall)
                cpu[name].append(used)
    med = {k: statistics.median(v) for k, v in times.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    load = os.getloadavg()
    lines = [f"# rmtrace record start-up and shutdown: `{args.command}` bare and recorded", "",
             f"command: `python bench/record_start.py {shlex.join(sys.argv[1:])}`",
             f"machine: {platform.node()}, {platform.machine()}, kernel {platform.release()}, {os.cpu_count()} CPUs, "
             f"Python {platform.python_version()}; load average {load_before[0]:.2f} before the run, "
             f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} after it",
             f"medians of {args.rounds} alternating rounds (after one warm-up round of each)", "",
             "| way | median wall | min | max | median CPU (user + system) | min CPU |",
             "| --- | --- | --- | --- | --- | --- |"]
    for way, values in times.items():
        lines.append(f"| {way} | {med[way] * 1e3:.1f} ms | {min(values) * 1e3:.1f} ms | {max(values) * 1e3:.1f} ms | "
                     f"{med_cpu[way] * 1e3:.1f} ms | {min(cpu[way]) * 1e3:.1f} ms |")
    lines.append("")
    for way in list(ways)[1:]:
        # Each round's own difference too: the goal is met only where the whole range of them is inside it.
        rounds = [a - b for a, b in zip(times[way], times["bare"])]
        verdict = "met" if max(rounds) <= 0.150 else "not met" if min(rounds) > 0.150 else "inside the noise"
        lines.append(f"added by {way}: {(med[way] - med['bare']) * 1e3:+.1f} ms wall, "
                     f"{(med_cpu[way] - med_cpu['bare']) * 1e3:+.1f} ms CPU; per round {statistics.median(rounds) * 1e3:+.1f} "
                     f"ms wall [{min(rounds) * 1e3:+.1f}, {max(rounds) * 1e3:+.1f}] (goal <= 150 ms: {verdict})")
    if args.before:
        # Rounds run back to back, so a round's ways share the machine's state of the moment: the median
        # of each round's own difference says more of a change than the difference of two medians.
        # The ratio of each round's pair (report.paired_ratio), with its range: above 1 over the whole range,
        # this tree's is the faster; a range that holds 1 is inside the noise.
        lines += ["", "each --before way against this tree's, per round: the median of the rounds' own differences "
                  "(this tree's - the other's), and the other's / this tree's, median [range] (CPU, then wall):"]
        for way in list(ways)[4:]:
            mine = "rmtrace record" if way.startswith("rmtrace record") else "record command alone"
            cpu_d = statistics.median(a - b for a, b in zip(cpu[mine], cpu[way]))
            wall_d = statistics.median(a - b for a, b in zip(times[mine], times[way]))
            ratios = []
            for series in (cpu, times):
                med_r, low, high = paired_ratio(series[way], series[mine])
                verdict = "this tree faster" if low > 1 else "this tree slower" if high < 1 else "inside the noise"
                ratios.append(f"{med_r:.3f} [{low:.3f}, {high:.3f}] ({verdict})")
            lines.append(f"{mine} - {way}: {cpu_d * 1e3:+.1f} ms CPU, {wall_d * 1e3:+.1f} ms wall; "
                         f"ratio CPU {ratios[0]}, wall {ratios[1]}")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        Path(args.output).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How long rmtrace's commands take to start, beside the interpreter's own start (`python -c pass`).

    python bench/cli_startup.py [--rounds 15]

Each round runs, one after another in a fresh process each: `python -c pass`
(the baseline), `rmtrace --help`, `rmtrace show nvidia-smi-q` (the 410-record
shipped capture, every call decoded and printed to /dev/null), `rmtrace info
nvidia-smi-q` and `rmtrace replay --help`.  Rounds alternate the commands, so
a disturbance of the machine lands on all of them alike; the table gives each
command's median and best wall time and its median as a multiple of the
baseline's.

Twice: with bytecode cached (the way an installed package runs: the cache
goes to a temporary PYTHONPYCACHEPREFIX, filled by one run first), and as
this checkout runs with PYTHONDONTWRITEBYTECODE=1 (the standard library's
bytecode is read, rmtrace's modules are compiled on every run unless the
checkout has __pycache__ folders).  Wall and CPU time both: on a loaded
machine the wall time includes waiting for a CPU; the goals are wall time on
an idle one, where the two agree.
Goals (issue 14): `rmtrace --help` <= 0.2 s and `show` of nvidia-smi-q <= 0.5 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from report import print_rows

SCRIPT = os.path.join(os.path.dirname(sys.executable), "rmtrace")
RMTRACE = [SCRIPT] if os.path.exists(SCRIPT) else [sys.executable, "-m", "rmtrace.cli.main"]
"""The console script pip installed beside this interpreter (what a user runs), else the module."""
CASES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "rmtrace --help": [*RMTRACE, "--help"],
    "rmtrace show nvidia-smi-q": [*RMTRACE, "show", "nvidia-smi-q"],
    "rmtrace info nvidia-smi-q": [*RMTRACE, "info", "nvidia-smi-q"],
    "rmtrace replay --help": [*RMTRACE, "replay", "--help"],
}
GOALS_S = {"rmtrace --help": 0.2, "rmtrace show nvidia-smi-q": 0.5}


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds, and the CPU seconds (user + system) the process used: on a loaded machine the
    wall time also counts waiting for a CPU, the CPU time does not."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}")
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def measure(env: dict[str, str], rounds: int) -> dict[str, list[tuple[float, float]]]:
    for argv in CASES.values():  # fill the bytecode cache, if there is one, and the page cache
        run_once(argv, env)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in CASES}
    for r in range(rounds):
        order = list(CASES.items())
        if r % 2:
            order.reverse()
        for name, argv in order:
            times[name].append(run_once(argv, env))
    return times


def table(title: str, times: dict[str, list[tuple[float, float]]]) -> None:
    base_wall = statistics.median(w for w, _ in times["python -c pass"])
    base_cpu = statistics.median(c for _, c in times["python -c pass"])
    print(f"\n{title}")
    rows = [("command", f"{'wall':>7} {'best':>7} {'x base':>7}   {'cpu':>7} {'x base':>7}  goal (wall)")]
    for name, xs in times.items():
        wall = statistics.median(w for w, _ in xs)
        cpu = statistics.median(c for _, c in xs)
        goal = GOALS_S.get(name)
        verdict = "" if goal is None else f"<= {goal:.1f}s {'met' if wall <= goal else 'not met'}"
        rows.append((name, f"{wall:>6.3f}s {min(w for w, _ in xs):>6.3f}s {wall / base_wall:>6.1f}x   "
                           f"{cpu:>6.3f}s {cpu / base_cpu:>6.1f}x  {verdict}"))
    print_rows(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="alternating rounds per mode (default 15)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]} ({sys.executable}), {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f} at the start, {args.rounds} rounds")
    with tempfile.TemporaryDirectory(prefix="rmtrace-pyc-") as cache:
        cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        table("bytecode cached (an installed package)", measure(dict(cached, PYTHONPYCACHEPREFIX=cache), args.rounds))
    table("rmtrace's bytecode not written (PYTHONDONTWRITEBYTECODE=1, as in this workspace: its modules "
          "compiled on every run)", measure(dict(os.environ, PYTHONDONTWRITEBYTECODE="1"), args.rounds))
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()

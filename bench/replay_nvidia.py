"""The replay's time inside the driver against the recorded time inside the driver, on a GPU machine.

Per capture, alternating rounds of

* **replay**: the committed capture replayed against the real driver
  (``--against nvidia``, recorded schedule, in this process): the ns each
  replayed call spent inside ``ioctl`` as its client process timed it, beside
  the ns the committed capture recorded for the same calls;
* **record** (``--program CAPTURE=COMMAND``): the same program recorded afresh with
  ``rmtrace record`` in the same run, its calls of the kinds the replay
  replays (the same safety table decides) summed the same way: what the
  recorded time inside the driver is on this machine now.

It prints the totals per round, the medians, the ratios replay / committed
capture and replay / fresh recording (goal: <= 1.1x), and per operation the
last round's replay beside the capture.  What else ran on the GPU is printed
at the start and the end (nvidia-smi's compute processes, the load average).

  python3 bench/replay_nvidia.py --program cuda-streams=./cuda_streams \
      --program "torch-one-kernel=python3 -c '...'" --rounds 5 -o bench/results/replay_nvidia-h200.md

Only on a machine with the NVIDIA driver: it replays what the safety table
allows and nothing else.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from rmtrace.decoders.profiles.safety import replay_tables
from rmtrace.replayer.plan import Plan, build_plan
from rmtrace.replayer.runner import replay
from rmtrace.replayer.schedules import Schedule
from rmtrace.replayer.targets.nvidia import NvidiaTarget
from rmtrace.replayer.targets.nvidia.compile import Compiler

from rmtrace.record import Source, decode_record

REPO = Path(__file__).resolve().parent.parent
CAPTURES = ("cuda-streams", "torch-one-kernel")


def replay_round(plan: Plan) -> tuple[int, int, dict[str, list[int]], str]:
    """(replay ns, committed ns of the same calls, per operation [replay, committed], verdict) of one replay."""
    target = NvidiaTarget(plan)
    result = replay(plan, Schedule.parse("recorded"), target)
    per_op: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    replay_ns = recorded_ns = 0
    for stats, client in zip(target.client_tables(), plan.clients):
        replay_ns += stats.driver_ns
        recorded_ns += stats.recorded_ns
        for index, took, then in stats.times:
            op = per_op[client.messages[index].name.split("(")[0]]
            op[0] += took
            op[1] += then
            op[2] += 1
    return replay_ns, recorded_ns, per_op, ", ".join(c.summary() for c in result.clients)


def record_round(program: list[str], work: Path) -> tuple[int, dict[str, int]]:
    """ns inside the driver of a fresh recording's calls that the replay would replay, in all and per operation."""
    out = work / "fresh.trace"
    out.unlink(missing_ok=True)
    subprocess.run([sys.executable, "-m", "rmtrace.cli.main", "record", "-o", str(out), "--", *program], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    plan = build_plan(out)
    compiler = Compiler(plan.semantics, replay_tables(plan.semantics.profile))
    per_op: dict[str, int] = defaultdict(int)
    for client in plan.clients:
        program_ = compiler.compile(client.messages)
        for m, a in zip(client.messages, program_.actions):
            if a.kind == "ioctl" and decode_record(m.request).source in (Source.RM, Source.UVM):
                per_op[m.name.split("(")[0]] += m.dur_ns
    return sum(per_op.values()), per_op


def gpu_neighbours() -> str:
    try:
        apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,process_name", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        apps = "?"
    return f"GPU compute processes: {apps or 'none'}; load average {os.getloadavg()[0]:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--program", action="append", default=[], metavar="CAPTURE=COMMAND",
                        help="the command a capture recorded, recorded afresh each round (repeatable)")
    parser.add_argument("--captures", default=",".join(CAPTURES))
    parser.add_argument("-o", "--output", help="also write the report (markdown) here")
    args = parser.parse_args(argv)
    programs = {name: shlex.split(command) for name, _, command in (p.partition("=") for p in args.program)}
    lines = ["# `--against nvidia`: time inside the driver, replay against recording", "",
             f"{Path('/proc/driver/nvidia/version').read_text().splitlines()[0]}",
             f"{os.cpu_count()} CPUs; {gpu_neighbours()}", ""]
    for command in list(programs.values())[:1]:  # the first GPU work after an idle spell pays for waking it up
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.captures.split(","):
            plan = build_plan(REPO / "captures" / f"{name}.trace")
            fresh = programs.get(name)
            lines += [f"## {name}", "", "| round | replay ms | capture ms (same calls) | fresh recording ms | verdicts |",
                      "| --- | --- | --- | --- | --- |"]
            replays, captured, recorded = [], [], []
            per_op: dict[str, list[int]] = {}
            fresh_op: dict[str, int] = {}
            for round_ in range(1, args.rounds + 1):  # alternating: replay, then record afresh
                r_ns, c_ns, per_op, verdicts = replay_round(plan)
                f_ns = None
                if fresh:
                    f_ns, fresh_op = record_round(fresh, Path(tmp))
                replays.append(r_ns)
                captured.append(c_ns)
                if f_ns is not None:
                    recorded.append(f_ns)
                lines.append(f"| {round_} | {r_ns / 1e6:.2f} | {c_ns / 1e6:.2f} | "
                             f"{f_ns / 1e6:.2f} | {verdicts} |" if f_ns is not None else
                             f"| {round_} | {r_ns / 1e6:.2f} | {c_ns / 1e6:.2f} | - | {verdicts} |")
                print(lines[-1], flush=True)
            med = statistics.median
            lines += ["", f"median replay / capture: **{med(replays) / med(captured):.3f}x**"]
            if recorded:
                lines.append(f"median replay / fresh recording (same run, alternated): "
                             f"**{med(replays) / med(recorded):.3f}x**")
            lines += ["", "| operation (last round) | calls | replay ms | capture ms | replay / capture | fresh recording ms |",
                      "| --- | --- | --- | --- | --- | --- |"]
            for op, (took, then, n) in sorted(per_op.items(), key=lambda kv: -kv[1][1]):
                ratio = f"{took / then:.2f}" if then else "-"
                again = f"{fresh_op[op] / 1e6:.3f}" if op in fresh_op else "-"
                lines.append(f"| {op} | {n} | {took / 1e6:.3f} | {then / 1e6:.3f} | {ratio} | {again} |")
            lines.append("")
    lines += [f"After: {gpu_neighbours()}", "", f"Made by `python3 bench/replay_nvidia.py {' '.join(argv or sys.argv[1:])}` "
              f"on {time.strftime('%Y-%m-%d')}."]
    text = "\n".join(lines)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

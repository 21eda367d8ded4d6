"""What `rmtrace record` costs a traced program, against the same program untraced, in one run.

Per intercepted ioctl, side by side in one process: tests/c/rmprog.c's
``bench`` mode (``stack``, ``heap`` or ``nested``: where its buffers live)
alternates batches of RM controls between the ctl fd as opened (which the shim traces) and the same device reopened through
/proc/self/fd (a path the shim leaves alone), and prints the median ns per
call of each.  Run under ``rmtrace record``, the difference is what capture
adds to one ioctl; run bare, it is the noise floor.  The program also runs
under ``strace -f -e trace=ioctl`` where strace is installed (the anchor).
The ``none`` mode times an ioctl on a pipe: what a non-NVIDIA fd pays for
passing through the shim (bare vs recorded, across processes).

``--shim NAME=PATH`` adds a way recording with another build of the shim, in
the same alternating rounds (a change to the shim against the one before it);
``--record-way NAME=OPTIONS`` one recording with other options of ``rmtrace
record`` (a ring's size).
``--cpus LIST`` runs every way on those CPUs.  On the H200 an RM control costs ~2.0 us in
some processes and ~3.3 us in others, and capture adds more in the slower (the virtual CPU
runs everything ~1.6x slower for a while: bench/results/record_overhead-h200.md); a pinned
process still draws either, so the report also splits the rounds by that cost.
``--program-cpus LIST`` runs only the measured program there (through taskset), the
recorder where ``--cpus`` (or nothing) puts it: whether the recorder's CPU moves the cost.
The report is written again after each section, so a run cut short keeps what it measured.

End to end: a whole program (``--e2e CMD``; by default rmprog's threaded
workload) runs alternately bare and recorded; the program's own elapsed time
(a line ``elapsed_ms X`` in its output) and the wall time of the whole run,
recorder start-up and shutdown included, are compared.

Two places:
  python bench/record_overhead.py                 # here: test device dir + tests/c/fakedrv.c
  python bench/record_overhead.py --real --e2e ./cuda_streams   # on a GPU machine: /dev/nvidiactl

Here fakedrv runs with FAKEDRV_TRUSTING (no readability checks of its own),
so an ioctl costs almost nothing and the shim's share stands out.  With
--real, rmprog's control names an invalid RM client: the driver refuses it
without doing anything.  Medians of --rounds alternating runs.  Three cases
(stack, heap, nested) say where the buffers live.  Goals: <= 0.25 us added
per intercepted ioctl in each case, <= 1 % end to end in >= 15 rounds.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from report import paired_ratio  # noqa: E402

from tests.capture_support import build_programs, fakedrv_environment, make_device_dir  # noqa: E402

NS = re.compile(r"traced_ns ([\d.]+) untraced_ns ([\d.]+)")
CASES = {
    "stack": "ARG (the NVOS54) and 64-byte PARAMS, both on the calling thread's stack",
    "heap": "ARG and 64-byte PARAMS, both on the heap (as libcuda keeps most of its params)",
    "nested": "ARG, 16-byte PARAMS and the 128-byte class list they point to (NESTED), all on the heap",
}
ELAPSED = re.compile(r"elapsed_ms ([\d.]+)")


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    """(wall seconds, stdout) of one run; raises if it fails."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"{shlex.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return wall, proc.stdout


def wrappers(tmp: Path, rmtrace: list[str], shims: list[str], options: Sequence[str] = ()) -> dict[str, list[str]]:
    """Each way's command prefix: bare, rmtrace, rmtrace:NAME per ``--shim NAME=PATH`` and per ``--record-way
    NAME=OPTIONS`` (this tree's shim, recorded with those options of ``rmtrace record``), strace."""
    record = [*rmtrace, "record", "--force", "-o", str(tmp / "bench.trace")]
    ways = {"bare": [], "rmtrace": [*record, "--"]}
    for spec in shims:
        name, _, path = spec.partition("=")
        if not path or not Path(path).is_file():
            raise SystemExit(f"--shim {spec}: want NAME=PATH of a built shim")
        ways[f"rmtrace:{name}"] = ["env", f"RMTRACE_SHIM={Path(path).resolve()}", *record, "--"]
    for spec in options:
        name, _, more = spec.partition("=")
        if not name or not more:
            raise SystemExit(f"--record-way {spec}: want NAME=OPTIONS of rmtrace record")
        ways[f"rmtrace:{name}"] = [*record, *shlex.split(more), "--"]
    if shutil.which("strace"):
        ways["strace"] = ["strace", "-f", "-e", "trace=ioctl", "-o", os.devnull]
    return ways


def micro(prog: list[str], env: dict[str, str], ways: dict[str, list[str]], calls: int, rounds: int,
          mode: list[str]):
    """Per way, the median over rounds of (traced fd ns, untraced fd ns) and the raw samples."""
    samples: dict[str, list[tuple[float, float]]] = {w: [] for w in ways}
    for _ in range(rounds):
        for way, prefix in ways.items():
            _wall, out = run([*prefix, *prog, "bench", str(calls), *mode], env)
            match = NS.search(out)
            if not match:
                raise SystemExit(f"{way}: no traced_ns/untraced_ns line in rmprog's output:\n{out}")
            samples[way].append((float(match.group(1)), float(match.group(2))))
    med = {w: (statistics.median(a for a, _ in v), statistics.median(b for _, b in v)) for w, v in samples.items()}
    return med, samples


def e2e(command: list[str], env: dict[str, str], ways: dict[str, list[str]], rounds: int):
    """Per way, the wall seconds and the program-reported ms of each round (a way whose program reports
    no elapsed time has no ms)."""
    wall: dict[str, list[float]] = {w: [] for w in ways}
    own: dict[str, list[float]] = {w: [] for w in ways}
    for _ in range(rounds):
        for way, prefix in ways.items():
            seconds, out = run([*prefix, *command], env)
            wall[way].append(seconds)
            match = ELAPSED.search(out)
            if match:
                own[way].append(float(match.group(1)))
    return wall, {w: v for w, v in own.items() if len(v) == rounds}


def e2e_lines(command: list[str], rounds: int, wall: dict[str, list[float]], own: dict[str, list[float]]) -> list[str]:
    """The end-to-end table (medians) and each way against bare round by round (paired_ratio of the
    program's own elapsed time, then of the whole run's wall): the goal (<= 1 % added) is met only where
    the whole range of the rounds' ratios is inside it."""
    med_wall = {w: statistics.median(v) for w, v in wall.items()}
    med_own = {w: statistics.median(v) for w, v in own.items()}
    lines = ["", f"## End to end: `{shlex.join(command)}`, medians of {rounds} alternating runs", "",
             "| way | program's own elapsed | vs bare | whole run (wall, recorder start-up included) | vs bare |",
             "| --- | --- | --- | --- | --- |"]
    for way in wall:
        mine = f"{med_own[way]:.1f} ms" if way in med_own else "-"
        mine_vs = pct(med_own[way], med_own["bare"]) if way in med_own and "bare" in med_own else "-"
        lines.append(f"| {way} | {mine} | {mine_vs} | {med_wall[way] * 1e3:.1f} ms | {pct(med_wall[way], med_wall['bare'])} |")
    lines += ["", "Each way against bare, round by round: its / bare's, median [range] (rounds); goal <= 1.01 for the "
              "program's own elapsed over the whole range", "",
              "| way | program's own elapsed | whole run (wall) |", "| --- | --- | --- |"]
    for way in (w for w in wall if w != "bare"):
        cells = []
        for series in (own, wall):
            if way not in series or "bare" not in series:
                cells.append("-")
                continue
            med, low, high = paired_ratio(series[way], series["bare"])
            verdict = "met" if high <= 1.01 else "not met" if low > 1.01 else "inside the noise"
            cells.append(f"{med:.4f} [{low:.4f}, {high:.4f}] ({rounds}): {verdict}" if series is own
                         else f"{med:.4f} [{low:.4f}, {high:.4f}] ({rounds})")
        lines.append(f"| {way} | {cells[0]} | {cells[1]} |")
    return lines


Samples = dict[str, dict[str, list[tuple[float, float]]]]  # case -> way -> per round (traced ns, untraced ns)


def mode_cut(all_samples: Samples) -> float | None:
    """Where the rounds' untraced times fall in two groups (on the H200 a process's ioctl costs ~2.0 or
    ~3.3 us for its whole run, and capture adds more to the slower), the cut between them: the one that
    leaves the least spread within the two groups (Otsu's); None unless their means are 20 % apart.
    strace's rounds are left out: under it every ioctl costs tens of us, a group of its own."""
    untraced = sorted(b for samples in all_samples.values() for w, v in samples.items() if w != "strace"
                      for _a, b in v)
    best: tuple[float, float] | None = None
    for i in range(2, len(untraced) - 1):
        low, high = untraced[:i], untraced[i:]
        spread = len(low) * statistics.pvariance(low) + len(high) * statistics.pvariance(high)
        if statistics.fmean(high) >= 1.2 * statistics.fmean(low) and (best is None or spread < best[0]):
            best = (spread, (low[-1] + high[0]) / 2)
    return None if best is None else best[1]


def builds(all_samples: Samples, cut: float | None) -> list[str]:
    """Each other build of the shim (``rmtrace:NAME``) against this tree's, round by round: what NAME's
    shim adds over what this tree's adds, both from the same round (bench/report.py's paired_ratio), so a
    change in the CPU's speed between rounds moves both.  Where the rounds fall in two modes, the ratio
    again over the rounds whose two processes drew the same one (a pair across the modes compares them,
    not the shims).  Above 1: this tree adds less; a range that holds 1 is inside the noise."""
    out: list[str] = []
    for case, samples in all_samples.items():
        for way in (w for w in samples if w.startswith("rmtrace:")):
            pairs = [(a1 - b1, a0 - b0, b1 < cut, b0 < cut) if cut else (a1 - b1, a0 - b0, True, True)
                     for (a1, b1), (a0, b0) in zip(samples[way], samples["rmtrace"])]
            cells = []
            for name, keep in (("all rounds", lambda p: True), ("both fast", lambda p: p[2] and p[3]),
                               ("both slow", lambda p: not p[2] and not p[3])):
                chosen = [p for p in pairs if keep(p)]
                if not chosen or (name != "all rounds" and cut is None):
                    cells.append("-")
                    continue
                med, low, high = paired_ratio([p[0] for p in chosen], [p[1] for p in chosen])
                verdict = ("too few rounds" if len(chosen) < 5 else "less" if low > 1 else "more" if high < 1
                           else "inside the noise")
                cells.append(f"{med:.3f} [{low:.3f}, {high:.3f}] ({len(chosen)}): {verdict}")
            out.append(f"| {case} | {way} | " + " | ".join(cells) + " |")
    if not out:
        return []
    return ["", "Each other build against this tree's: per round, what its shim adds / what this tree's adds "
            "(median [range] (rounds); above 1 over the whole range: this tree's adds less)", "",
            "| case | build | all rounds | both processes in the fast mode | both in the slow mode |",
            "| --- | --- | --- | --- | --- |", *out]


def modes(all_samples: Samples, cut: float | None) -> list[str]:
    """The paired differences again, split by the ioctl's own cost at cut (mode_cut): a median of rounds
    that mix the two modes says more of how many rounds each way drew of each than of the shim."""
    if cut is None:
        return []
    out = ["", f"Split by the untraced ioctl's cost (below or above {cut:.0f} ns): added, median of the rounds' own "
           "differences (rounds)", "", "| case | way | faster rounds | slower rounds |", "| --- | --- | --- | --- |"]
    for case, samples in all_samples.items():
        for way, v in ((w, v) for w, v in samples.items() if w != "strace"):
            cells = []
            for group in ([a - b for a, b in v if b < cut], [a - b for a, b in v if b >= cut]):
                cells.append(f"{statistics.median(group):+.0f} ns ({len(group)})" if group else "-")
            out.append(f"| {case} | {way} | {cells[0]} | {cells[1]} |")
    return out


def cpu_list(text: str) -> set[int]:
    """CPUs named as taskset names them: ``2,3``, ``2-5``, ``0,8-11``."""
    cpus: set[int] = set()
    for part in text.split(","):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def pct(a: float, b: float) -> str:
    return f"{(a / b - 1) * 100:+.1f}%"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--real", action="store_true", help="use the real driver (/dev/nvidiactl), not fakedrv")
    parser.add_argument("--calls", type=int, default=20000, help="ioctls per micro run")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds per measurement")
    parser.add_argument("--e2e", nargs=argparse.REMAINDER, help="the end-to-end command (the rest of the line)")
    parser.add_argument("--e2e-rounds", type=int, default=15)
    parser.add_argument("--rmtrace", default=f"{sys.executable} -m rmtrace.cli.main",
                        help="how to run rmtrace (default: this Python's)")
    parser.add_argument("--shim", action="append", default=[], metavar="NAME=PATH",
                        help="one more way: rmtrace recording with this build of the shim (RMTRACE_SHIM), "
                             "to compare builds side by side in the same rounds")
    parser.add_argument("--record-way", action="append", default=[], metavar="NAME=OPTIONS",
                        help="one more way: rmtrace recording with these options of rmtrace record (e.g. "
                             "ring1m='--ring-size 1M'), in the same rounds")
    parser.add_argument("--cpus", help="run every way on these CPUs (a list as taskset takes: 2,3 or 2-3)")
    parser.add_argument("--program-cpus", help="run only the measured programs on these CPUs (taskset), the "
                        "recorder where --cpus puts it")
    parser.add_argument("--e2e-only", action="store_true", help="only the end-to-end runs (--e2e), no ioctl timings")
    parser.add_argument("--no-passthrough", action="store_true",
                        help="leave out the pass-through ioctl (a pipe's): the intercepted ones only")
    parser.add_argument("-o", "--output", help="also write the results here")
    args = parser.parse_args()
    if args.e2e_only and not args.e2e:
        parser.error("--e2e-only wants --e2e CMD")
    if args.cpus:
        os.sched_setaffinity(0, cpu_list(args.cpus))  # the ways' processes inherit it

    tmp = Path(tempfile.mkdtemp(prefix="rmtrace-bench-"))
    progs = build_programs(tmp / "bin")
    env = dict(os.environ, RMPROG_TIME="1")
    if args.real:
        env["RMPROG_DEVICE_DIR"] = "/dev"
        where = "real driver (/dev/nvidiactl; the control names an invalid client)"
    else:
        env = fakedrv_environment(progs, make_device_dir(tmp / "dev"), env)
        env["FAKEDRV_TRUSTING"] = "1"
        where = "test device dir + tests/c/fakedrv.c, trusting (an ioctl that costs almost nothing)"
    ways = wrappers(tmp, shlex.split(args.rmtrace), args.shim, args.record_way)
    pinned = ["taskset", "-c", args.program_cpus] if args.program_cpus else []
    lines = [f"# rmtrace record overhead ({'real driver' if args.real else 'test device'})", "",
             f"command: `python bench/record_overhead.py {shlex.join(sys.argv[1:])}`",
             f"machine: {platform.node()}, {platform.machine()}, kernel {platform.release()}, "
             f"{os.cpu_count()} CPUs, Python {platform.python_version()}",
             f"driver: {where}", f"ways: {', '.join(ways)} (strace: {'yes' if 'strace' in ways else 'not installed'})",
             f"medians of {args.rounds} alternating rounds of {args.calls} ioctls each", ""]

    lines += ["## Per intercepted ioctl, side by side in one process",
              "", "The NVIDIA fd as opened vs the same device reopened through /proc/self/fd, which the shim leaves "
              "alone; the difference in the process is what capture adds to one ioctl (goal: <= 250 ns in each case).",
              "", "| case | buffers recorded before and after | way | traced fd (ns) | untraced fd (ns) | "
              "added in the process | added, median of the rounds' own differences | traced fd vs bare |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    all_samples: Samples = {}

    def flush() -> None:
        if args.output:
            Path(args.output).write_text("\n".join(lines) + "\n")

    for case, what in ({} if args.e2e_only else CASES).items():
        med, samples = micro([*pinned, str(progs["rmprog"])], env, ways, args.calls, args.rounds, [case])
        all_samples[case] = samples
        for way, (traced, untraced) in med.items():
            # Per round, traced and untraced come from one process: their difference is paired.  The
            # ioctl's own cost differs between processes by more than capture adds (on the H200 some run
            # at ~2 us, some at ~3.3 us), so the difference of the two medians can mix them.
            paired = statistics.median(a - b for a, b in samples[way])
            lines.append(f"| {case} | {what} | {way} | {traced:.0f} | {untraced:.0f} | {traced - untraced:+.0f} ns | "
                         f"{paired:+.0f} ns | {traced - med['bare'][0]:+.0f} ns |")
        flush()
    if not args.e2e_only:
        cut = mode_cut(all_samples)
        lines += modes(all_samples, cut) + builds(all_samples, cut)
        lines += [""] + [f"samples, {case} (traced/untraced ns): " + "; ".join(
            f"{w} " + ", ".join(f"{a:.0f}/{b:.0f}" for a, b in v) for w, v in samples.items())
            for case, samples in all_samples.items()]
    if not args.e2e_only and not args.no_passthrough:
        lines += ["", "## Per pass-through ioctl (FIONREAD on a pipe: not an NVIDIA fd), across processes", "",
            "| way | ns per ioctl | added vs bare |", "| --- | --- | --- |"]
        med_none, _ = micro([*pinned, str(progs["rmprog"])], env, ways, args.calls, args.rounds, ["none"])
        for way, (ns, _same) in med_none.items():
            lines.append(f"| {way} | {ns:.0f} | {ns - med_none['bare'][0]:+.0f} ns |")

    # rmprog's threaded workload needs fakedrv (the real driver refuses its controls): with --real, only --e2e's.
    command = args.e2e or (None if args.real else [str(progs["rmprog"]), "threads", "4", "5000"])
    if command and args.e2e_rounds > 0:  # --e2e-rounds 0: no end-to-end runs, so no table of them
        flush()
        wall, own = e2e([*pinned, *command], env, ways, args.e2e_rounds)
        lines += e2e_lines(command, args.e2e_rounds, wall, own)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        Path(args.output).write_text(text)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

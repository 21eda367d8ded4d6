"""The capture shim's instructions per traced ioctl, counted by callgrind, beside other builds of it.

``rmprog bench N CASE`` (tests/c/rmprog.c: stack, heap or nested, as bench/record_overhead.py) runs
under the recorder with the test device and fakedrv, inside ``valgrind --tool=callgrind``; the
count is traced_ioctl's inclusive instructions less those of the ioctl it passes the call to
(fakedrv's), over the calls it made: what the shim itself executes for one traced ioctl, enter and
exit.  Instruction counts are exact and do not depend on the machine's load, so a change to the
shim shows here to the instruction; what they cost in time on the real driver is
bench/record_overhead.py's question (on the H200).

With ``--lines`` it also counts the 64-byte lines the shim's own code touches per traced ioctl, code
and data apart, under valgrind's lackey (every access traced, so a few calls only): after the system
call the driver's microseconds have evicted much of what the shim uses, so each line is a miss to
fetch again, which an instruction count does not see.

Records are timed by clock_gettime here (``--no-tsc``): under valgrind rdtsc is emulated and no
TSC sample passes the shim's test, so the TSC way would sample the clock at every record, which
the real machine does once every few ms.

  python bench/shim_instructions.py [--calls 20000] [--lines] [--shim NAME=KMOD_SHIM_DIR ...]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.capture_support import _shim_build, build_programs, fakedrv_environment, make_device_dir  # noqa: E402

CASES = ("stack", "heap", "nested")
SUPPORT = REPO / "tests" / "capture_support.py"
CALLER = re.compile(r"^\s*([\d,]+) \([^)]*\)\s+\*\s+\S*:traced_ioctl \[")
CALLEE = re.compile(r"^\s*([\d,]+) \([^)]*\)\s+>\s+\S*?:?([\w.@]+) \(([\d,]+)x\)")


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def per_call(profile: Path) -> tuple[float, dict[str, float]]:
    """(shim instructions per traced ioctl, each callee of traced_ioctl's share per call but the driver's)."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--tree=calling", str(profile)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    start, caller = next((i, m) for i, m in enumerate(map(CALLER.match, out)) if m)
    total = _number(caller.group(1))
    callees: dict[str, tuple[int, int]] = {}
    for line in out[start + 1:]:
        match = CALLEE.match(line)
        if not match:
            break
        callees[match.group(2)] = (_number(match.group(1)), _number(match.group(3)))
    driver, calls = callees.pop("ioctl")  # the call passed on: fakedrv's ioctl
    return (total - driver) / calls, {name: n / calls for name, (n, _) in callees.items()}


def count(shim: Path, case: str, calls: int, progs: dict[str, Path], env: dict[str, str], tmp: Path) -> tuple[float, dict]:
    profile = tmp / f"{shim.stem}-{case}.callgrind"
    run_env = dict(env, RMTRACE_SHIM=str(shim), FAKEDRV_TRUSTING="1", RMPROG_TIME="1")
    cmd = [sys.executable, str(SUPPORT), "--no-tsc", "-o", str(tmp / "bench.trace"), "--",
           "valgrind", "--tool=callgrind", f"--callgrind-out-file={profile}", str(progs["rmprog"]), "bench",
           str(calls), case]
    proc = subprocess.run(cmd, env=run_env, capture_output=True, text=True, cwd=REPO)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return per_call(profile)


LACKEY_CALLS = 200  # ioctls of a --lines run (half of them traced): lackey writes a line per access
LACKEY_ACCESS = re.compile(r"^(I | L| S| M) +([0-9a-f]+),")


def lines_touched(shim: Path, case: str, progs: dict[str, Path], env: dict[str, str], tmp: Path) -> tuple[float, float]:
    """(code lines, data lines): the median over traced ioctls of the distinct 64-byte lines that the
    shim's instructions run from and load or store, from one traced_ioctl entry to the next (its
    enter, the exit, and the untraced call in between), the first half of the calls left out (their
    one-time work) and the last (it runs on to the program's exit)."""
    log = tmp / f"{shim.stem}-{case}.lackey"
    run_env = dict(env, RMTRACE_SHIM=str(shim), FAKEDRV_TRUSTING="1", RMPROG_TIME="1")
    cmd = [sys.executable, str(SUPPORT), "--no-tsc", "-o", str(tmp / "bench.trace"), "--", "valgrind",
           "--tool=lackey", "--trace-mem=yes", f"--log-file={log}", str(progs["rmprog"]), "bench",
           str(LACKEY_CALLS), case]
    proc = subprocess.run(cmd, env=run_env, capture_output=True, text=True, cwd=REPO)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    symbols = {f[2]: int(f[0], 16) for f in (line.split() for line in subprocess.run(
        ["nm", str(shim)], capture_output=True, text=True, check=True).stdout.splitlines()) if len(f) == 3}
    headers = subprocess.run(["objdump", "-h", str(shim)], capture_output=True, text=True, check=True).stdout
    text_end = max(int(f[3], 16) + int(f[2], 16) for f in (line.split() for line in headers.splitlines())
                   if len(f) > 5 and f[1].startswith(".text"))
    accesses = [(kind, int(addr, 16)) for kind, addr in
                (m.groups() for m in map(LACKEY_ACCESS.match, log.read_text().splitlines()) if m)]
    # Where the library was loaded: of the page-aligned bases at which both hooks' entries ran, the one
    # at which traced_ioctl's entry ran most often (another library's code can match the two by chance).
    ran = Counter(a for kind, a in accesses if kind == "I ")
    entry, hook = symbols["traced_ioctl"], symbols["ioctl"]
    base = max((a - entry for a in ran if (a - entry) % 4096 == 0 and a - entry + hook in ran),
               key=lambda b: ran[b + entry])
    calls: list[tuple[set[int], set[int]]] = []
    ours = False
    for kind, addr in accesses:
        if kind == "I ":
            ours = base <= addr < base + text_end
            if addr == base + entry:
                calls.append((set(), set()))
            if ours and calls:
                calls[-1][0].add(addr >> 6)
        elif ours and calls:
            calls[-1][1].add(addr >> 6)
    kept = calls[len(calls) // 2:-1]
    return statistics.median(len(c) for c, _ in kept), statistics.median(len(d) for _, d in kept)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20000, help="ioctls per run (half of them traced)")
    parser.add_argument("--lines", action="store_true", help="also count the cache lines touched (lackey)")
    parser.add_argument("--shim", action="append", default=[], metavar="NAME=DIR",
                        help="also count the test build of the shim sources in DIR (a kmod_shim/ folder)")
    args = parser.parse_args()
    if not shutil.which("valgrind") or not shutil.which("callgrind_annotate"):
        raise SystemExit("valgrind (with callgrind_annotate) is not installed: apt-get install valgrind")
    tmp = Path(tempfile.mkdtemp(prefix="rmtrace-callgrind-"))
    progs = build_programs(tmp / "bin")
    env = fakedrv_environment(progs, make_device_dir(tmp / "dev"))
    shims = {"this tree": progs["shim"]}
    for spec in args.shim:
        name, _, source = spec.partition("=")
        if not source or not Path(source, "shim.h").is_file():
            raise SystemExit(f"--shim {spec}: want NAME=DIR of a kmod_shim/ source folder")
        shims[name] = _shim_build().build(tmp / f"{name}.so", test_hooks=True, source_dir=Path(source).resolve())
    print(f"shim instructions per traced ioctl (callgrind, {args.calls // 2} traced calls, clock_gettime)")
    print("| build | " + " | ".join(CASES) + " |")
    print("| --- |" + " --- |" * len(CASES))
    details = []
    for name, shim in shims.items():
        cells = []
        for case in CASES:
            n, parts = count(shim, case, args.calls, progs, env, tmp)
            cells.append(f"{n:.0f}")
            details.append(f"{name}, {case}: " + ", ".join(f"{k} {v:.0f}" for k, v in parts.items()))
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\nof which in traced_ioctl's callees (per call):\n" + "\n".join(details))
    if args.lines:
        print(f"\n64-byte lines the shim's code touches per traced ioctl (lackey, {LACKEY_CALLS // 2} traced calls): "
              "code / data")
        print("| build | " + " | ".join(CASES) + " |")
        print("| --- |" + " --- |" * len(CASES))
        for name, shim in shims.items():
            counts = [lines_touched(shim, case, progs, env, tmp) for case in CASES]
            print(f"| {name} | " + " | ".join(f"{code:.0f} / {data:.0f}" for code, data in counts) + " |")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.nice(10)
    sys.exit(main())

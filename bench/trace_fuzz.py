"""Damaged traces, in full: records recovered against records intact, per kind of damage.

For a shipped H200 capture rewritten by today's writer (tests/trace_damage.py), every
single-bit flip and every cut (``--all``; or a seeded sample: ``--flips N --cuts N``),
appended junk and swapped chunks.  Each case is read back as every command reads it,
and counted against the least it may leave: a flip costs at most the chunk it lands in,
a cut at most the chunk it cuts through, junk and swaps nothing.  The baseline column
is that bound (records intact); the goal is that no case falls below it, no case gives
a wrong record, and no case is refused.

  python bench/trace_fuzz.py                                  # nvidia-smi-q: every bit and cut
  python bench/trace_fuzz.py --trace cuda-streams-3x-sequential --flips 3000 --cuts 1000

The tests run a bounded sample of the same cases (tests/test_trace_fuzz.py).
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rmtrace import captures  # noqa: E402
from tests.trace_damage import Original, cut, flip, read_back, rewrite, sample  # noqa: E402

_original: Original | None = None
_scratch: Path | None = None


def _init(original: Original, scratch: str) -> None:
    global _original, _scratch
    _original, _scratch = original, Path(scratch) / f"case-{os.getpid()}.trace"


def _one(spec) -> tuple[str, int, int, int, bool, int]:
    """One case, made here from (kind, where) so that only numbers cross between processes."""
    assert _original is not None and _scratch is not None
    kind, where = spec
    case = flip(_original, where) if kind == "flip" else cut(_original, where) if kind == "cut" else where
    _scratch.write_bytes(case.data)
    got = read_back(_original, _scratch)
    return case.kind, case.at_least, got.recovered, got.wrong, got.error is not None, case.where


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", default="nvidia-smi-q", help="a shipped capture (default nvidia-smi-q)")
    parser.add_argument("--flips", type=int, help="a sample of this many random bit flips (default: every bit)")
    parser.add_argument("--cuts", type=int, default=1000, help="with --flips: this many random cuts")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("-o", "--output", help="also write the results here")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="rmtrace-fuzz-") as tmp:
        original = rewrite(captures.path(args.trace), Path(tmp) / "orig.trace")
        if args.flips is None:
            specs = [("flip", bit) for bit in range(len(original.data) * 8)] + \
                [("cut", size) for size in range(len(original.data))]
            specs += [("other", case) for case in sample(original, 0, 0)]
        else:
            specs = [(c.kind, c.where) if c.kind in ("flip", "cut") else ("other", c)
                     for c in sample(original, args.flips, args.cuts)]
        t0 = time.perf_counter()
        rows: dict[str, list[tuple[int, int, int, bool]]] = defaultdict(list)
        worst: dict[str, tuple[int, int]] = {}
        with ProcessPoolExecutor(args.jobs, initializer=_init, initargs=(original, tmp)) as pool:
            for kind, bound, got, wrong, refused, where in pool.map(_one, specs, chunksize=256):
                rows[kind].append((bound, got, wrong, refused))
                if got < bound and (kind not in worst or got - bound < worst[kind][0]):
                    worst[kind] = (got - bound, where)
        seconds = time.perf_counter() - t0

    lines = [f"# Damaged traces: records recovered against records intact ({args.trace})", "",
             f"command: `python bench/trace_fuzz.py {shlex.join(sys.argv[1:])}`",
             f"machine: {platform.node()}, {platform.machine()}, {os.cpu_count()} CPUs, Python "
             f"{platform.python_version()}; {seconds:.0f} s with {args.jobs} workers",
             f"trace: {original.total:,} records in {len(original.chunks)} chunks, {len(original.data):,} bytes "
             f"(rewritten by today's writer: 64 KiB chunks, 16 KiB zstd blocks, zstd checksums)", "",
             "| damage | cases | records intact (sum of bounds) | records recovered | recovered / intact | "
             "below the bound | wrong records | refused | distinct counts | median recovered |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for kind in ("flip", "cut", "junk", "swap"):
        got = rows.get(kind, [])
        if not got:
            continue
        intact = sum(b for b, _, _, _ in got)
        recovered = sum(g for _, g, _, _ in got)
        below = sum(g < b for b, g, _, _ in got)
        lines.append(f"| {kind} | {len(got):,} | {intact:,} | {recovered:,} | {recovered / max(intact, 1):.3f} | "
                     f"{below} | {sum(w for _, _, w, _ in got)} | {sum(r for _, _, _, r in got)} | "
                     f"{len({g for _, g, _, _ in got})} | {statistics.median(g for _, g, _, _ in got):,.0f} |")
    for kind, (short, where) in worst.items():
        lines.append(f"\nworst {kind}: {short} records below the bound at {where}")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        Path(args.output).write_text(text)
    return 1 if worst or any(w or r for v in rows.values() for _, _, w, r in v) else 0


if __name__ == "__main__":
    sys.exit(main())

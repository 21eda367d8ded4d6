"""Several bench/record_overhead.py reports pooled, by mode: what each way adds per intercepted ioctl, and what
this tree's shim (``rmtrace``) adds above each other way round by round (bench/results/record_overhead-h200.md).

Each report's rounds are split at its own cut between the CPU's two modes (its "below or above N ns" line); a
round's pair counts only where both ways' processes drew the same mode.  Printed per case and mode: each way's
median added ns (rounds), and ``rmtrace``'s added minus the way's, median [range], quartiles (rounds): where the
way is a floor (bench/shim_floor.c, RMTRACE_BENCH_FLOOR), what the shim adds above it.  With
``--above WAY``, WAY takes ``rmtrace``'s place: what one floor adds above another, round by round.

  python bench/overhead_pool.py [--above WAY] OUT1/overhead-fast.md [OUT2/overhead-fast.md ...]
"""

from __future__ import annotations

import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

CUT = re.compile(r"below or above (\d+) ns")
SAMPLES = re.compile(r"samples, (\w+) \(traced/untraced ns\): (.*)")

Key = tuple[str, str, str]  # case, mode, way


def pool(paths: list[Path], ref: str = "rmtrace") -> tuple[dict[Key, list[float]], dict[Key, list[float]]]:
    """(each way's added ns per round, ref's added minus the way's per round of one mode), by (case, mode, way)."""
    added: dict[Key, list[float]] = defaultdict(list)
    above: dict[Key, list[float]] = defaultdict(list)
    for path in paths:
        text = path.read_text()
        found = CUT.search(text)
        if not found:
            raise SystemExit(f"{path}: no cut between the modes (fewer than two modes in its rounds)")
        cut = float(found.group(1))
        for line in text.splitlines():
            match = SAMPLES.match(line)
            if not match:
                continue
            case, rest = match.groups()
            ways = {name: [tuple(map(float, v.split("/"))) for v in values.split(", ")]
                    for name, values in (part.split(" ", 1) for part in rest.split("; "))}
            if ref not in ways:
                raise SystemExit(f"{path}: no way {ref!r} in its {case} rounds (it has {', '.join(sorted(ways))})")
            for way, rounds in ways.items():
                for (traced, untraced), (ours, ours_untraced) in zip(rounds, ways[ref]):
                    mode = "fast" if untraced < cut else "slow"
                    added[case, mode, way].append(traced - untraced)
                    if way != ref and (ours_untraced < cut) == (untraced < cut):
                        above[case, mode, way].append((ours - ours_untraced) - (traced - untraced))
    return added, above


def main(argv: list[str]) -> int:
    ref = "rmtrace"
    if argv[:1] == ["--above"] and len(argv) > 1:
        ref, argv = argv[1], argv[2:]
    if not argv:
        raise SystemExit(__doc__)
    added, above = pool([Path(a) for a in argv], ref)
    for case in dict.fromkeys(k[0] for k in added):
        for mode in ("fast", "slow"):
            ways = sorted({k[2] for k in added if k[0] == case}, key=lambda w: (w != "bare", w != ref, w))
            for way in ways:
                mine, pairs = added.get((case, mode, way), []), above.get((case, mode, way), [])
                line = f"{case:6} {mode} {way:24} " + (f"{statistics.median(mine):+5.0f} ({len(mine)})" if mine else "-")
                if len(pairs) >= 4:
                    q1, _, q3 = statistics.quantiles(pairs, n=4)
                    line += (f"   {ref} above it {statistics.median(pairs):+4.0f} [{min(pairs):+.0f}, {max(pairs):+.0f}]"
                             f" q {q1:+.0f}..{q3:+.0f} ({len(pairs)})")
                print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env bash
# One shim against another on the H200 (bench/results/record_overhead-h200.md): BEFORE's shim beside this
# tree's in the same alternating rounds of bench/record_overhead.py, pinned to the CPU that ran a bare RM
# control fastest and then to the slowest (which CPUs those are moves from machine to machine: each is
# measured first).  A pinned process still draws either of the CPU's two speeds, so record_overhead.py
# splits the rounds by each round's own untraced cost, and pairs the two shims round by round.  No end
# to end and no topology (bench/h200_cpu_kinds.sh has those): the shims' figures only, in OUTDIR.
set -u
OUT=${1:?usage: bench/h200_shim_ab.sh OUTDIR BEFORE}
BEFORE=${2:?usage: bench/h200_shim_ab.sh OUTDIR BEFORE}
ROUNDS=${ROUNDS:-30}
BIN=$(mktemp -d)
. "$(dirname "$0")/h200_common.sh"
build_tools "$BIN" "$BEFORE" || exit 1

# Which CPUs are which now.
cpu_costs "$BIN" "$OUT"

# The recorder as installed (PYTHONPATH), not this checkout's rmtrace/ (which has no kmod_shim inside): -P keeps
# `python3 -m` from putting the working directory first on sys.path.
for which in fast slow; do
    cpu=$FAST
    [ "$which" = slow ] && cpu=$SLOW
    python3 bench/record_overhead.py --rmtrace "python3 -P -m rmtrace.cli.main" --shim "before=$BIN/before.so" --real --rounds "$ROUNDS" --calls 20000 \
        --cpus "$cpu" -o "$OUT/overhead-$which.md" > /dev/null
done
uptime | tee "$OUT/load.txt"

#!/usr/bin/env bash
# The capture-side figures of issue 13 on the GPU machine, in one run (see bench/results/*-h200.md).
set -u
# With BEFORE (another version's source tree, e.g. `git archive COMMIT`), the same rounds also run
# that version: the overhead bench records with its shim, and the start-up bench runs its record
# command (installed into a folder of its own): the change against the version before it.  Each
# NAME=TREE after it adds one more shim, built from TREE/kmod_shim, to the overhead bench's rounds
# (a variant of a change, measured beside it).
# ROUNDS (default 15) alternating rounds in each bench.  CPUS (e.g. 2,3) pins the overhead bench's ways to
# those CPUs (record_overhead.py --cpus: the H200's CPUs are of two speeds for an ioctl).
OUT=${1:?usage: bench/h200_fmt.sh OUTDIR [BEFORE [NAME=TREE ...]]}
ROUNDS=${ROUNDS:-15}
BEFORE=${2:-}
shift $(($# < 2 ? $# : 2))
BIN=$(mktemp -d)
. "$(dirname "$0")/h200_common.sh"
{ cat /proc/driver/nvidia/version; uname -a; nproc; cat /sys/devices/system/clocksource/clocksource0/current_clocksource; } 2>&1
gcc -O2 -Wall -o "$BIN/cuda_streams" captures/programs/cuda_streams.c -ldl || exit 1
gcc -O2 -Wall -pthread -o "$BIN/clock_cost" bench/clock_cost.c || exit 1
"$BIN/clock_cost" | tee "$OUT/clock_cost-h200.txt"
python3 -m rmtrace.cli.main record --force -o "$OUT/cuda-streams.trace" -- "$BIN/cuda_streams"
python3 -m rmtrace.cli.main info "$OUT/cuda-streams.trace"
python3 -X importtime -m rmtrace.cli.main record -o "$BIN/importtime.trace" -- true 2> "$OUT/importtime-h200.txt"
SHIMS=()
STARTS=()
if [ -n "$BEFORE" ]; then
    build_shim "$BEFORE" "$BIN/before.so" || exit 1
    SHIMS=(--shim "before=$BIN/before.so")
    python3 -m pip install -q --no-index --no-deps --no-build-isolation --target "$BIN/before-site" "$BEFORE" || exit 1
    STARTS=(--before "$BIN/before-site")
fi
add_shims "$BIN" "$@" || exit 1
python3 bench/record_start.py "${STARTS[@]}" --rounds "$ROUNDS" -o "$OUT/record_start-h200.md"
python3 bench/record_overhead.py "${SHIMS[@]}" ${CPUS:+--cpus "$CPUS"} --real --rounds "$ROUNDS" --calls 20000 --e2e-rounds "$ROUNDS" \
    -o "$OUT/record_overhead-h200.md" --e2e "$BIN/cuda_streams"

#!/usr/bin/env bash
# One shim against another on the H200 (bench/results/record_overhead-h200.md): BEFORE's shim beside this
# tree's in the same alternating rounds of bench/record_overhead.py, pinned to the CPU that ran a bare RM
# control fastest and then to the slowest (which CPUs those are moves from machine to machine: each is
# measured first).  A pinned process still draws either of the CPU's two speeds, so record_overhead.py
# splits the rounds by each round's own untraced cost, and pairs the two shims round by round.  Each
# NAME=TREE after BEFORE adds one more shim, built from TREE/kmod_shim, to the same rounds (a variant of
# the change, measured beside it).  With FLOORS=1, the two floors of this tree's shim too (h200_common.sh's
# add_floors: the interposer alone, and a traced ioctl's state, call id and two timestamps without a record);
# FLOORS="2 3" names the floors (3: the two records without their buffers).
# RECORD_WAYS (NAME=OPTIONS;...) adds ways recording this tree's shim with other options of rmtrace record.
# OVERHEAD_ARGS: more options of record_overhead.py (--no-passthrough).
# WHICH (default "fast slow") says which of the two CPUs to run on; `split` runs the program on the fast one and
# the recorder on another fast CPU (the ring's lines then cross cores, as unpinned), SPLIT_ROUNDS rounds.
# With E2E_ROUNDS, the CUDA program end to end too, unpinned (the <= 1 % condition), every way in
# alternating rounds.  Also the machine's facts that the figures depend on (its CPU vulnerabilities'
# mitigations, bench/clock_cost.c's primitives, its ring writes pinned as the bench's program is with a reader
# on another fast CPU) in OUTDIR/machine.txt.  No topology
# (bench/h200_cpu_kinds.sh has it): the shims' figures only, in OUTDIR.
set -u
OUT=${1:?usage: bench/h200_shim_ab.sh OUTDIR BEFORE [NAME=TREE ...]}
BEFORE=${2:?usage: bench/h200_shim_ab.sh OUTDIR BEFORE [NAME=TREE ...]}
shift 2
ROUNDS=${ROUNDS:-30}
E2E_ROUNDS=${E2E_ROUNDS:-0}
BIN=$(mktemp -d)
. "$(dirname "$0")/h200_common.sh"
build_tools "$BIN" "$BEFORE" || exit 1
SHIMS=(--shim "before=$BIN/before.so")
add_shims "$BIN" "$@" || exit 1
FLOORS=${FLOORS:-0}
[ "$FLOORS" = 1 ] && FLOORS="1 2"
if [ "$FLOORS" != 0 ]; then add_floors "$BIN" . $FLOORS || exit 1; fi
# RECORD_WAYS="NAME=OPTIONS;...": more ways, this tree's shim recorded with those options of rmtrace record.
IFS=';' read -r -a RECORD_WAYS <<< "${RECORD_WAYS:-}"
for spec in "${RECORD_WAYS[@]}"; do SHIMS+=(--record-way "$spec"); done

gcc -O2 -Wall -pthread -o "$BIN/clock_cost" bench/clock_cost.c || exit 1

# Which CPUs are which now.
cpu_costs "$BIN" "$OUT"
READER=${FASTSET%%,*}
READER=${READER:-$SLOW}
{ grep -m1 'model name' /proc/cpuinfo; grep . /sys/devices/system/cpu/vulnerabilities/*
  cat /sys/devices/system/clocksource/clocksource0/current_clocksource
  echo "clock_cost $FAST $READER (writer, reader)"; "$BIN/clock_cost" "$FAST" "$READER"; } > "$OUT/machine.txt" 2>&1

# The recorder as installed (PYTHONPATH), not this checkout's rmtrace/ (which has no kmod_shim inside): -P keeps
# `python3 -m` from putting the working directory first on sys.path.
RMTRACE="python3 -P -m rmtrace.cli.main"
for which in ${WHICH:-fast slow}; do
    where=(--cpus "$FAST")
    [ "$which" = slow ] && where=(--cpus "$SLOW")
    [ "$which" = split ] && where=(--cpus "$READER" --program-cpus "$FAST")
    rounds=$ROUNDS
    [ "$which" = split ] && rounds=${SPLIT_ROUNDS:-$ROUNDS}
    python3 bench/record_overhead.py --rmtrace "$RMTRACE" "${SHIMS[@]}" --real --rounds "$rounds" --calls 20000 \
        "${where[@]}" ${OVERHEAD_ARGS:-} -o "$OUT/overhead-$which.md" > /dev/null
done
if [ "$E2E_ROUNDS" -gt 0 ]; then
    gcc -O2 -Wall -o "$BIN/cuda_streams" captures/programs/cuda_streams.c -ldl || exit 1
    python3 bench/record_overhead.py --rmtrace "$RMTRACE" "${SHIMS[@]}" --real --e2e-only --e2e-rounds "$E2E_ROUNDS" \
        -o "$OUT/e2e.md" --e2e "$BIN/cuda_streams" > /dev/null
fi
uptime | tee -a "$OUT/machine.txt"

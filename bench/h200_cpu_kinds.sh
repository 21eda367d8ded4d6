#!/usr/bin/env bash
# The H200's two kinds of CPU and what capture adds on each (bench/results/record_overhead-h200.md,
# docs/capture.md): the topology as the guest sees it, each CPU's RM control cost (which CPUs are the
# fast ones today), bench/cpu_kinds.c on the fastest and the slowest, where a traced process's ring
# pages lie, then the overhead bench pinned to that fast CPU and to that slow one (BEFORE's shim beside
# this tree's, 15 alternating rounds; the CUDA program end to end on the fast one), and last the slow CPU's program
# with the recorder on the other fast CPUs (does the recorder's CPU move the cost?).  Every step
# writes its own file in OUTDIR as it goes, so a run cut short keeps the steps it finished.
set -u
OUT=${1:?usage: bench/h200_cpu_kinds.sh OUTDIR BEFORE}
BEFORE=${2:?usage: bench/h200_cpu_kinds.sh OUTDIR BEFORE}
ROUNDS=${ROUNDS:-15}
BIN=$(mktemp -d)
. "$(dirname "$0")/h200_common.sh"
build_tools "$BIN" "$BEFORE" || exit 1
gcc -O2 -Wall -pthread -o "$BIN/cpu_kinds" bench/cpu_kinds.c || exit 1
gcc -O2 -Wall -o "$BIN/cuda_streams" captures/programs/cuda_streams.c -ldl || exit 1

{
    cat /proc/driver/nvidia/version; uname -a; lscpu; lscpu -e
    for n in /sys/devices/system/node/node*; do echo "$n cpus $(cat "$n/cpulist")"; grep MemTotal "$n/meminfo"; done
    numactl -H
    for c in /sys/devices/system/cpu/cpu[0-9]*; do
        echo "${c##*/} package $(cat "$c/topology/physical_package_id") core $(cat "$c/topology/core_id")" \
             "threads $(cat "$c/topology/thread_siblings_list") L2 $(cat "$c/cache/index2/shared_cpu_list")" \
             "L3 $(cat "$c/cache/index3/shared_cpu_list")"
    done
    grep -E '^(processor|cpu MHz|physical id|core id|apicid)' /proc/cpuinfo | paste - - - - -
    grep -m1 'model name' /proc/cpuinfo
    grep . /sys/devices/system/cpu/vulnerabilities/*
} > "$OUT/topology.txt" 2>&1

# Which CPUs are which today.
cpu_costs "$BIN" "$OUT"

FAST=$FAST SLOW=$SLOW "$BIN/cpu_kinds" > "$OUT/cpu_kinds.txt" 2>&1

# Where a recorded process's ring (and the recorder's session page) lie: numa_maps names the node.
RMPROG_DEVICE_DIR=/dev python3 -m rmtrace.cli.main record --force -o "$BIN/numa.trace" -- sh -c \
    "taskset -c $SLOW $BIN/rmprog bench 300000 stack & p=\$!; sleep 1; grep -E 'shm|ring|rmtrace' /proc/\$p/numa_maps
     grep -E 'Cpus_allowed_list|Mems_allowed_list' /proc/\$p/status; numastat -p \$p; wait" > "$OUT/numa_maps.txt" 2>&1

bench() {
    python3 bench/record_overhead.py --shim "before=$BIN/before.so" --real --rounds "$ROUNDS" --calls 20000 "$@"
}
bench --cpus "$FAST" --e2e-rounds "$ROUNDS" -o "$OUT/overhead-fast.md" --e2e "$BIN/cuda_streams" > /dev/null
bench --cpus "$SLOW" -o "$OUT/overhead-slow.md" > /dev/null
bench --cpus "$FASTSET" --program-cpus "$SLOW" -o "$OUT/overhead-slow-recorder-fast.md" > /dev/null
